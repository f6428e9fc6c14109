// libcurl (Debian: libcurl4-openssl-dev). Only Sources/CurlShim includes it.
#include <curl/curl.h>
