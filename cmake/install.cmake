# Install rules for C/C++ users: libcudla.so.1, its headers, a CMake package (softdla::cudla, CUDA::cudla)
# and a pkg-config file (cudla.pc). Two layouts, one set of relocatable files:
#
#   cmake --install build --prefix P          the Python wheel (pip wheel ., SKBUILD)
#   P/lib/libcudla.so.1 (+ .so link)           softdla/libcudla.so.1 (+ libcudla.so, a linker script)
#   P/lib/libsoftdla_cuda.so (if built)        softdla/libsoftdla_cuda.so
#   P/lib/libnvscibuf.so.1, libnvscisync.so.1  softdla/libnvsci{buf,sync}.so.1 (+ .so linker scripts)
#     (+ .so links)
#   P/include/cudla.h, cudlaExternalEtbl.hpp,  softdla/include/...
#     softdla/cudla_ext.h, nvscibuf.h,
#     nvscisync.h, nvscierror.h
#   P/lib/cmake/softdla/softdlaConfig*.cmake   softdla/lib/cmake/softdla/...
#   P/lib/pkgconfig/cudla.pc                   softdla/lib/pkgconfig/cudla.pc
#   P/bin/softdla                              softdla/softdla-cli, run by the entry point bin/softdla
#
# The CUDA plugin is found at run time next to libcudla.so.1 (src/engine/gpu_loader.cpp), so the two
# always land in one directory. The wheel's Python files, extensions and libraries are installed by the
# Python section of CMakeLists.txt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Destinations, relative to the install root. In the wheel the package directory softdla/ plays the prefix;
# its lib/ holds only the CMake and pkg-config files, so CMAKE_PREFIX_PATH=<package directory> works too.
if(SKBUILD)
  set(_sd_prefix softdla/)
  set(_sd_libdir softdla)
  set(_sd_incdir softdla/include)
  set(_sd_cmakedir softdla/lib/cmake/softdla)
  set(_sd_pcdir softdla/lib/pkgconfig)
else()
  set(_sd_prefix "")
  set(_sd_libdir ${CMAKE_INSTALL_LIBDIR})
  set(_sd_incdir ${CMAKE_INSTALL_INCLUDEDIR})
  foreach(_d _sd_libdir _sd_incdir)
    if(IS_ABSOLUTE "${${_d}}")
      message(FATAL_ERROR "softdla's install tree is relocatable: give CMAKE_INSTALL_LIBDIR and "
                          "CMAKE_INSTALL_INCLUDEDIR relative to the prefix (got ${${_d}})")
    endif()
  endforeach()
  set(_sd_cmakedir ${_sd_libdir}/cmake/softdla)
  set(_sd_pcdir ${_sd_libdir}/pkgconfig)
endif()

# The generated files name every path relative to their own directory (via the prefix).
function(_softdla_rel out from to)
  file(RELATIVE_PATH rel "/r/${from}" "/r/${to}")
  if(rel STREQUAL "")
    set(rel .)
  endif()
  set(${out} ${rel} PARENT_SCOPE)
endfunction()
_softdla_rel(SOFTDLA_CFG_TO_PREFIX ${_sd_cmakedir} "${_sd_prefix}")
_softdla_rel(SOFTDLA_PC_TO_PREFIX ${_sd_pcdir} "${_sd_prefix}")
_softdla_rel(SOFTDLA_CFG_LIBDIR "${_sd_prefix}" ${_sd_libdir})
_softdla_rel(SOFTDLA_CFG_INCLUDEDIR "${_sd_prefix}" ${_sd_incdir})
set(SOFTDLA_PC_INCLUDEDIR "\${prefix}/${SOFTDLA_CFG_INCLUDEDIR}")
if(SOFTDLA_CFG_LIBDIR STREQUAL ".")
  set(SOFTDLA_PC_LIBDIR "\${prefix}")
else()
  set(SOFTDLA_PC_LIBDIR "\${prefix}/${SOFTDLA_CFG_LIBDIR}")
endif()
set(_sd_gen ${CMAKE_CURRENT_BINARY_DIR}/package)
configure_file(${CMAKE_CURRENT_LIST_DIR}/softdlaConfig.cmake.in ${_sd_gen}/softdlaConfig.cmake @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/cudla.pc.in ${_sd_gen}/cudla.pc @ONLY)
# 0.x: a minor version may change the API.
write_basic_package_version_file(${_sd_gen}/softdlaConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)

install(FILES ${PROJECT_SOURCE_DIR}/include/cudla.h DESTINATION ${_sd_incdir})
# NVIDIA's layer-wise statistics samples include it beside cudla.h.
install(FILES ${PROJECT_SOURCE_DIR}/include/cudlaExternalEtbl.hpp DESTINATION ${_sd_incdir})
install(FILES ${PROJECT_SOURCE_DIR}/include/softdla/cudla_ext.h ${PROJECT_SOURCE_DIR}/include/softdla/cudla_status_name.h
        DESTINATION ${_sd_incdir}/softdla)
# NvSciBuf / NvSciSync for standalone-mode programs (docs/NVSCI.md).
install(FILES ${PROJECT_SOURCE_DIR}/include/nvscibuf.h ${PROJECT_SOURCE_DIR}/include/nvscisync.h
              ${PROJECT_SOURCE_DIR}/include/nvscierror.h DESTINATION ${_sd_incdir})
install(FILES ${_sd_gen}/softdlaConfig.cmake ${_sd_gen}/softdlaConfigVersion.cmake DESTINATION ${_sd_cmakedir})
install(FILES ${_sd_gen}/cudla.pc DESTINATION ${_sd_pcdir})

if(SKBUILD)
  if(TARGET softdla_cuda)
    # cuBLASLt from the nvidia-cublas wheel when it is installed in the same environment
    # (pip install softdla[cuda]); else the system's (LD_LIBRARY_PATH, the CUDA toolkit in ld.so.conf).
    if(CUDAToolkit_VERSION_MAJOR GREATER_EQUAL 13)
      set_target_properties(softdla_cuda PROPERTIES INSTALL_RPATH "$ORIGIN/../nvidia/cu${CUDAToolkit_VERSION_MAJOR}/lib")
    else()
      set_target_properties(softdla_cuda PROPERTIES INSTALL_RPATH "$ORIGIN/../nvidia/cublas/lib")
    endif()
  endif()
  # A wheel holds no symbolic links: `-lcudla` and find_library(... cudla) find this linker script, which
  # GNU ld, gold and lld resolve next to itself. Programs record libcudla.so.1 (the SONAME) either way.
  file(WRITE ${_sd_gen}/libcudla.so "INPUT(libcudla.so.1)\n")
  install(FILES ${_sd_gen}/libcudla.so DESTINATION ${_sd_libdir})
  # libcudla.so.1 opens these next to itself (src/runtime/nvsci_loader.cpp).
  foreach(_part buf sync)
    install(FILES $<TARGET_FILE:nvsci${_part}> DESTINATION ${_sd_libdir} RENAME libnvsci${_part}.so.1)
    file(WRITE ${_sd_gen}/libnvsci${_part}.so "INPUT(libnvsci${_part}.so.1)\n")
    install(FILES ${_sd_gen}/libnvsci${_part}.so DESTINATION ${_sd_libdir})
  endforeach()
else()
  install(TARGETS cudla nvscibuf nvscisync LIBRARY DESTINATION ${_sd_libdir})  # lib*.so.1.0.0, .so.1, .so
  # bin/softdla finds the CUDA plugin in lib/ through its RUNPATH (src/engine/gpu_loader.cpp).
  file(RELATIVE_PATH _sd_bin_to_lib "/r/${CMAKE_INSTALL_BINDIR}" "/r/${_sd_libdir}")
  set_target_properties(softdla PROPERTIES INSTALL_RPATH "$ORIGIN/${_sd_bin_to_lib}")
  install(TARGETS softdla RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  if(TARGET softdla_cuda)
    # Keeps the build's path to cuBLASLt (the CUDA toolkit's lib directory) in the installed plugin.
    set_target_properties(softdla_cuda PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
    install(TARGETS softdla_cuda LIBRARY DESTINATION ${_sd_libdir})
  endif()
endif()
