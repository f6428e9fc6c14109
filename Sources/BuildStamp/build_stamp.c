#include "build_stamp.h"

#ifndef BROKER_COMMIT
#define BROKER_COMMIT ""
#endif

const char *broker_build_commit(void) { return BROKER_COMMIT; }
