// Nothing for Swift to call: this target only supplies the executable's entry point.
#ifndef BROKER_FUZZ_DRIVER_H
#define BROKER_FUZZ_DRIVER_H
#endif
