# ---- libnvscibuf.so.1 / libnvscisync.so.1: NvSciBuf and NvSciSync for cuDLA standalone programs ----
# Included from the top-level CMakeLists.txt so the libraries land next to libcudla.so.1 (docs/NVSCI.md).
foreach(_part buf sync)
  file(GLOB _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/${_part}_*.cpp)
  add_library(nvsci${_part} SHARED ${_srcs})
  target_include_directories(nvsci${_part} PUBLIC ${CMAKE_CURRENT_LIST_DIR}/../../include
                             PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_compile_options(nvsci${_part} PRIVATE ${SOFTDLA_WARNINGS})
  target_link_libraries(nvsci${_part} PRIVATE Threads::Threads)
  set(_map ${CMAKE_CURRENT_LIST_DIR}/libnvsci${_part}.map)
  set_target_properties(nvsci${_part} PROPERTIES SOVERSION 1 VERSION 1.0.0 LINK_DEPENDS ${_map})
  target_link_options(nvsci${_part} PRIVATE -Wl,--version-script=${_map})
  if(NOT (SOFTDLA_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang"))
    target_link_options(nvsci${_part} PRIVATE -Wl,--no-undefined)
  endif()
endforeach()
