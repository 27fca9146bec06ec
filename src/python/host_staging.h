// softdla._cudla_ext.StagedTensor (host_staging.cpp): Module.run's NumPy conversions in one C++ pass.
#pragma once
#include <nanobind/nanobind.h>

void bind_host_staging(nanobind::module_& m);
