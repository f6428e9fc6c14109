// libpq, PostgreSQL's C client library (Debian: libpq-dev). Only Sources/Postgres includes it.
#include <libpq-fe.h>
