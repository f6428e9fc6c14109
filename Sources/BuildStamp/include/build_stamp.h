#ifndef BUILD_STAMP_H
#define BUILD_STAMP_H

/// The commit the binary was built from, as the build named it (`BROKER_COMMIT` in the
/// environment of `swift build`: the Makefile and the Dockerfile set it); "" when unnamed.
const char *broker_build_commit(void);

#endif
