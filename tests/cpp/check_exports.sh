#!/bin/sh
# libcudla.so.1 exports exactly the 16 cuDLA functions, cudlaGetExternalExportTable (the layer-wise
# statistics export table of cudlaExternalEtbl.hpp), softdla-prefixed extensions, and its SONAME.
set -eu
lib="$1"
names=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sort)
expected="cudlaCreateDevice cudlaDestroyDevice cudlaDeviceGetAttribute cudlaDeviceGetCount cudlaGetLastError
cudlaGetNvSciSyncAttributes cudlaGetVersion cudlaImportExternalMemory cudlaImportExternalSemaphore cudlaMemRegister
cudlaMemUnregister cudlaModuleGetAttributes cudlaModuleLoadFromMemory cudlaModuleUnload cudlaSetTaskTimeoutInMs
cudlaSubmitTask cudlaGetExternalExportTable"
for f in $expected; do
  echo "$names" | grep -qx "$f" || { echo "missing export: $f"; exit 1; }
done
count=$(echo "$names" | grep -c '^cudla')
[ "$count" -eq 17 ] || { echo "expected 17 cudla* exports, found $count"; exit 1; }
other=$(echo "$names" | grep -v -e '^cudla' -e '^softdla' || true)
[ -z "$other" ] || { echo "unexpected exports: $other"; exit 1; }
objdump -p "$lib" | grep -q 'SONAME *libcudla.so.1' || { echo "SONAME is not libcudla.so.1"; exit 1; }
echo "16 cuDLA functions and cudlaGetExternalExportTable exported, SONAME libcudla.so.1"
