// The entry point of broker-fuzz.
//
// SwiftPM links an executable target with `--defsym main=<product>_main` (here broker_fuzz_main),
// which hides libFuzzer's own main. So this is that function, and it hands over to libFuzzer's
// driver with the Swift callback (@_cdecl LLVMFuzzerTestOneInput in Entry.swift). libFuzzer
// still calls LLVMFuzzerInitialize first.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int broker_fuzz_main(int argc, char **argv) {
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
