// NvSciBuf modules and the handle tables of libnvscibuf.so.1.
#include "buf_state.h"

namespace softdla::nvsci {

HandleTable<BufModule>& buf_modules() {
  static HandleTable<BufModule> t(0x5b01);
  return t;
}
HandleTable<BufAttrList>& buf_lists() {
  static HandleTable<BufAttrList> t(0x5b02);
  return t;
}
HandleTable<BufObj>& buf_objects() {
  static HandleTable<BufObj> t(0x5b03);
  return t;
}

}  // namespace softdla::nvsci

using namespace softdla::nvsci;

extern "C" NvSciError NvSciBufModuleOpen(NvSciBufModule* newModule) {
  if (!newModule) return NvSciError_BadParameter;
  *newModule = to_handle<NvSciBufModule>(buf_modules().add(std::make_shared<BufModule>()));
  return NvSciError_Success;
}

// Lists made from the module stay usable after it is closed (NVIDIA keeps a module alive while
// anything made from it is); only new lists are refused.
extern "C" void NvSciBufModuleClose(NvSciBufModule module) {
  if (auto m = buf_modules().remove(module)) m->open = false;
}
