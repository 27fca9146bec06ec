// NvSciBuf against its documented semantics: set once, reconcile (merge rules and conflicts), tensor
// sizes, CPU access rules, duplicates, and misused handles answered with errors (docs/NVSCI.md).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "nvscibuf.h"

namespace {

struct BufModuleFixture : ::testing::Test {
  NvSciBufModule module = nullptr;
  std::vector<NvSciBufAttrList> lists;
  void SetUp() override { ASSERT_EQ(NvSciBufModuleOpen(&module), NvSciError_Success); }
  void TearDown() override {
    for (auto l : lists) NvSciBufAttrListFree(l);
    NvSciBufModuleClose(module);
  }
  NvSciBufAttrList new_list() {
    NvSciBufAttrList l = nullptr;
    EXPECT_EQ(NvSciBufAttrListCreate(module, &l), NvSciError_Success);
    lists.push_back(l);
    return l;
  }
  // A 1-D int8 tensor of `n` bytes, as NVIDIA's cuDLAStandaloneMode sample describes its buffers.
  NvSciBufAttrList tensor_list(uint64_t n, bool cpu = true, NvSciBufAttrValAccessPerm perm = NvSciBufAccessPerm_ReadWrite,
                               NvSciBufAttrValDataType type = NvSciDataType_Int8) {
    NvSciBufAttrList l = new_list();
    NvSciBufType t = NvSciBufType_Tensor;
    uint32_t dims = 1, align[] = {1};
    uint64_t sizes[] = {n}, base = 512;
    NvSciBufAttrKeyValuePair kv[] = {
        {NvSciBufGeneralAttrKey_Types, &t, sizeof(t)},
        {NvSciBufTensorAttrKey_DataType, &type, sizeof(type)},
        {NvSciBufTensorAttrKey_NumDims, &dims, sizeof(dims)},
        {NvSciBufTensorAttrKey_SizePerDim, sizes, sizeof(sizes)},
        {NvSciBufTensorAttrKey_AlignmentPerDim, align, sizeof(align)},
        {NvSciBufTensorAttrKey_BaseAddrAlign, &base, sizeof(base)},
        {NvSciBufGeneralAttrKey_RequiredPerm, &perm, sizeof(perm)},
        {NvSciBufGeneralAttrKey_NeedCpuAccess, &cpu, sizeof(cpu)}};
    EXPECT_EQ(NvSciBufAttrListSetAttrs(l, kv, 8), NvSciError_Success);
    return l;
  }
  NvSciBufAttrList reconcile(std::vector<NvSciBufAttrList> in, NvSciError expect = NvSciError_Success) {
    NvSciBufAttrList r = nullptr, c = nullptr;
    EXPECT_EQ(NvSciBufAttrListReconcile(in.data(), in.size(), &r, &c), expect);
    if (r) lists.push_back(r);
    if (c) lists.push_back(c);
    return expect == NvSciError_Success ? r : c;
  }
  template <typename T>
  T get(NvSciBufAttrList l, NvSciBufAttrKey key) {
    NvSciBufAttrKeyValuePair kv = {key, nullptr, 0};
    EXPECT_EQ(NvSciBufAttrListGetAttrs(l, &kv, 1), NvSciError_Success);
    T v{};
    EXPECT_EQ(kv.len, sizeof(T));
    if (kv.value && kv.len == sizeof(T)) std::memcpy(&v, kv.value, sizeof(T));
    return v;
  }
};

TEST_F(BufModuleFixture, SampleFlowAllocatesAWritableTensor) {
  NvSciBufAttrList r = reconcile({tensor_list(1000)});
  bool reconciled = false;
  ASSERT_EQ(NvSciBufAttrListIsReconciled(r, &reconciled), NvSciError_Success);
  EXPECT_TRUE(reconciled);
  EXPECT_EQ(get<uint64_t>(r, NvSciBufTensorAttrKey_Size), 1000u);
  EXPECT_EQ(get<NvSciBufAttrValAccessPerm>(r, NvSciBufGeneralAttrKey_ActualPerm), NvSciBufAccessPerm_ReadWrite);
  NvSciBufObj obj = nullptr;
  ASSERT_EQ(NvSciBufObjAlloc(r, &obj), NvSciError_Success);
  void* p = nullptr;
  ASSERT_EQ(NvSciBufObjGetCpuPtr(obj, &p), NvSciError_Success);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 512, 0u);
  std::memset(p, 7, 1000);  // the whole tensor is writable (ASan checks the bounds)
  NvSciBufObjFree(obj);
}

TEST_F(BufModuleFixture, EachKeyIsSetOnceAndAFailedSetChangesNothing) {
  NvSciBufAttrList l = new_list();
  bool cpu = true;
  NvSciBufType t = NvSciBufType_RawBuffer;
  uint64_t size = 64;
  NvSciBufAttrKeyValuePair one[] = {{NvSciBufGeneralAttrKey_NeedCpuAccess, &cpu, sizeof(cpu)}};
  ASSERT_EQ(NvSciBufAttrListSetAttrs(l, one, 1), NvSciError_Success);
  EXPECT_EQ(NvSciBufAttrListSetAttrs(l, one, 1), NvSciError_BadParameter);
  NvSciBufAttrKeyValuePair bad[] = {{NvSciBufGeneralAttrKey_Types, &t, sizeof(t)},
                                    {NvSciBufRawBufferAttrKey_Size, &size, 3}};  // wrong length
  EXPECT_EQ(NvSciBufAttrListSetAttrs(l, bad, 2), NvSciError_BadParameter);
  NvSciBufAttrKeyValuePair kv = {NvSciBufGeneralAttrKey_Types, nullptr, 0};
  ASSERT_EQ(NvSciBufAttrListGetAttrs(l, &kv, 1), NvSciError_Success);
  EXPECT_EQ(kv.value, nullptr);  // not set by the failed call
  EXPECT_EQ(kv.len, 0u);
  NvSciBufAttrKeyValuePair output = {NvSciBufTensorAttrKey_Size, &size, sizeof(size)};
  EXPECT_EQ(NvSciBufAttrListSetAttrs(l, &output, 1), NvSciError_BadParameter);  // reconciled output key
  NvSciBufAttrKeyValuePair unknown = {static_cast<NvSciBufAttrKey>(0x7777), &size, sizeof(size)};
  EXPECT_EQ(NvSciBufAttrListSetAttrs(l, &unknown, 1), NvSciError_BadParameter);
  uint64_t align = 3;
  NvSciBufAttrKeyValuePair odd = {NvSciBufRawBufferAttrKey_Align, &align, sizeof(align)};
  EXPECT_EQ(NvSciBufAttrListSetAttrs(l, &odd, 1), NvSciError_BadParameter);  // not a power of two
}

TEST_F(BufModuleFixture, ReconcileMergesPermissionsAndCpuAccess) {
  NvSciBufAttrList a = tensor_list(256, false, NvSciBufAccessPerm_Readonly);
  NvSciBufAttrList b = tensor_list(256, true, NvSciBufAccessPerm_ReadWrite);
  NvSciBufAttrList r = reconcile({a, b});
  EXPECT_TRUE(get<bool>(r, NvSciBufGeneralAttrKey_NeedCpuAccess));
  EXPECT_EQ(get<NvSciBufAttrValAccessPerm>(r, NvSciBufGeneralAttrKey_ActualPerm), NvSciBufAccessPerm_ReadWrite);
  // A reconciled list is final.
  bool cpu = false;
  NvSciBufAttrKeyValuePair kv = {NvSciBufGeneralAttrKey_EnableCpuCache, &cpu, sizeof(cpu)};
  EXPECT_EQ(NvSciBufAttrListSetAttrs(r, &kv, 1), NvSciError_BadParameter);
  NvSciBufAttrList again = nullptr, conflict = nullptr;
  EXPECT_EQ(NvSciBufAttrListReconcile(&r, 1, &again, &conflict), NvSciError_BadParameter);
}

TEST_F(BufModuleFixture, DisagreeingListsGiveAConflictList) {
  NvSciBufAttrList conflict = reconcile({tensor_list(256), tensor_list(512)}, NvSciError_ReconciliationFailed);
  ASSERT_NE(conflict, nullptr);
  NvSciBufAttrKeyValuePair kv = {NvSciBufTensorAttrKey_Size, nullptr, 0};
  EXPECT_EQ(NvSciBufAttrListGetAttrs(conflict, &kv, 1), NvSciError_BadParameter);  // only for dumping
  NvSciBufObj obj = nullptr;
  EXPECT_EQ(NvSciBufObjAlloc(conflict, &obj), NvSciError_BadParameter);
  reconcile({tensor_list(64, true, NvSciBufAccessPerm_ReadWrite, NvSciDataType_Int8),
             tensor_list(64, true, NvSciBufAccessPerm_ReadWrite, NvSciDataType_Float16)},
            NvSciError_ReconciliationFailed);
  NvSciBufAttrList no_type = new_list();
  bool cpu = true;
  NvSciBufAttrKeyValuePair only_cpu = {NvSciBufGeneralAttrKey_NeedCpuAccess, &cpu, sizeof(cpu)};
  ASSERT_EQ(NvSciBufAttrListSetAttrs(no_type, &only_cpu, 1), NvSciError_Success);
  reconcile({no_type}, NvSciError_ReconciliationFailed);  // Types is required
}

TEST_F(BufModuleFixture, TensorSizeFollowsTypeDimsAndAlignment) {
  NvSciBufAttrList l = new_list();
  NvSciBufType t = NvSciBufType_Tensor;
  NvSciBufAttrValDataType dt = NvSciDataType_Float16;
  uint32_t dims = 3, align[] = {1, 1, 32};
  uint64_t sizes[] = {2, 3, 5};
  NvSciBufAttrKeyValuePair kv[] = {{NvSciBufGeneralAttrKey_Types, &t, sizeof(t)},
                                   {NvSciBufTensorAttrKey_DataType, &dt, sizeof(dt)},
                                   {NvSciBufTensorAttrKey_NumDims, &dims, sizeof(dims)},
                                   {NvSciBufTensorAttrKey_SizePerDim, sizes, sizeof(sizes)},
                                   {NvSciBufTensorAttrKey_AlignmentPerDim, align, sizeof(align)}};
  ASSERT_EQ(NvSciBufAttrListSetAttrs(l, kv, 5), NvSciError_Success);
  NvSciBufAttrList r = reconcile({l});
  // Rows of 5 halves (10 bytes) padded to 32, times 3 times 2.
  EXPECT_EQ(get<uint64_t>(r, NvSciBufTensorAttrKey_Size), 2u * 3u * 32u);
}

TEST_F(BufModuleFixture, RawBuffersAndCpuAccessRules) {
  NvSciBufAttrList l = new_list();
  NvSciBufType t = NvSciBufType_RawBuffer;
  uint64_t size = 100;
  NvSciBufAttrKeyValuePair kv[] = {{NvSciBufGeneralAttrKey_Types, &t, sizeof(t)},
                                   {NvSciBufRawBufferAttrKey_Size, &size, sizeof(size)}};
  ASSERT_EQ(NvSciBufAttrListSetAttrs(l, kv, 2), NvSciError_Success);
  NvSciBufAttrList r = reconcile({l});
  NvSciBufObj obj = nullptr;
  ASSERT_EQ(NvSciBufObjAlloc(r, &obj), NvSciError_Success);
  void* p = nullptr;
  const void* cp = nullptr;
  EXPECT_EQ(NvSciBufObjGetCpuPtr(obj, &p), NvSciError_BadParameter);  // no NeedCpuAccess, read-only
  EXPECT_EQ(NvSciBufObjGetConstCpuPtr(obj, &cp), NvSciError_BadParameter);
  NvSciBufAttrList own = nullptr;
  ASSERT_EQ(NvSciBufObjGetAttrList(obj, &own), NvSciError_Success);
  EXPECT_EQ(get<uint64_t>(own, NvSciBufRawBufferAttrKey_Size), 100u);
  NvSciBufObjFree(obj);
}

TEST_F(BufModuleFixture, DuplicatesShareMemoryThatOutlivesTheFirstHandle) {
  NvSciBufAttrList r = reconcile({tensor_list(64)});
  NvSciBufObj a = nullptr, b = nullptr;
  ASSERT_EQ(NvSciBufObjAlloc(r, &a), NvSciError_Success);
  ASSERT_EQ(NvSciBufObjDup(a, &b), NvSciError_Success);
  EXPECT_NE(a, b);
  void *pa = nullptr, *pb = nullptr;
  ASSERT_EQ(NvSciBufObjGetCpuPtr(a, &pa), NvSciError_Success);
  ASSERT_EQ(NvSciBufObjGetCpuPtr(b, &pb), NvSciError_Success);
  EXPECT_EQ(pa, pb);
  NvSciBufObjFree(a);
  EXPECT_EQ(NvSciBufObjGetCpuPtr(a, &pa), NvSciError_BadParameter);
  ASSERT_EQ(NvSciBufObjGetCpuPtr(b, &pb), NvSciError_Success);
  static_cast<uint8_t*>(pb)[63] = 1;  // still allocated
  NvSciBufObjFree(b);
}

TEST_F(BufModuleFixture, MisusedHandlesAreErrorsNotCrashes) {
  NvSciBufAttrList r = reconcile({tensor_list(64)});
  NvSciBufObj obj = nullptr;
  ASSERT_EQ(NvSciBufObjAlloc(r, &obj), NvSciError_Success);
  NvSciBufObjFree(obj);
  NvSciBufObjFree(obj);  // twice: ignored
  void* p = nullptr;
  EXPECT_EQ(NvSciBufObjGetCpuPtr(obj, &p), NvSciError_BadParameter);
  EXPECT_EQ(NvSciBufObjGetCpuPtr(nullptr, &p), NvSciError_BadParameter);
  EXPECT_EQ(NvSciBufObjGetCpuPtr(reinterpret_cast<NvSciBufObj>(0x1234), &p), NvSciError_BadParameter);
  // A list handle is not an object handle, nor a module handle.
  EXPECT_EQ(NvSciBufObjGetCpuPtr(reinterpret_cast<NvSciBufObj>(r), &p), NvSciError_BadParameter);
  NvSciBufAttrList l = nullptr;
  EXPECT_EQ(NvSciBufAttrListCreate(reinterpret_cast<NvSciBufModule>(r), &l), NvSciError_BadParameter);
  EXPECT_EQ(NvSciBufAttrListCreate(module, nullptr), NvSciError_BadParameter);
  NvSciBufAttrList freed = tensor_list(64);
  NvSciBufAttrListFree(freed);
  NvSciBufAttrList rr = nullptr, cc = nullptr;
  EXPECT_EQ(NvSciBufAttrListReconcile(&freed, 1, &rr, &cc), NvSciError_BadParameter);
  EXPECT_EQ(NvSciBufAttrListReconcile(nullptr, 1, &rr, &cc), NvSciError_BadParameter);
  EXPECT_EQ(NvSciBufAttrListSetAttrs(freed, nullptr, 0), NvSciError_BadParameter);
  NvSciBufAttrListFree(nullptr);
  NvSciBufModuleClose(nullptr);
  NvSciBufObjFree(nullptr);
}

TEST(NvSciBufModule, ListsOutliveTheirModuleButAClosedModuleMakesNoNewOnes) {
  NvSciBufModule m = nullptr;
  ASSERT_EQ(NvSciBufModuleOpen(&m), NvSciError_Success);
  NvSciBufAttrList l = nullptr;
  ASSERT_EQ(NvSciBufAttrListCreate(m, &l), NvSciError_Success);
  NvSciBufModuleClose(m);
  EXPECT_EQ(NvSciBufAttrListCreate(m, &l), NvSciError_BadParameter);
  bool cpu = true;
  NvSciBufAttrKeyValuePair kv = {NvSciBufGeneralAttrKey_NeedCpuAccess, &cpu, sizeof(cpu)};
  EXPECT_EQ(NvSciBufAttrListSetAttrs(l, &kv, 1), NvSciError_Success);
  NvSciBufAttrListFree(l);
}

TEST(NvSciBufModule, ListsOfDifferentModulesDoNotReconcile) {
  NvSciBufModule m1 = nullptr, m2 = nullptr;
  ASSERT_EQ(NvSciBufModuleOpen(&m1), NvSciError_Success);
  ASSERT_EQ(NvSciBufModuleOpen(&m2), NvSciError_Success);
  NvSciBufAttrList l[2] = {nullptr, nullptr}, r = nullptr, c = nullptr;
  ASSERT_EQ(NvSciBufAttrListCreate(m1, &l[0]), NvSciError_Success);
  ASSERT_EQ(NvSciBufAttrListCreate(m2, &l[1]), NvSciError_Success);
  EXPECT_EQ(NvSciBufAttrListReconcile(l, 2, &r, &c), NvSciError_BadParameter);
  NvSciBufAttrListFree(l[0]);
  NvSciBufAttrListFree(l[1]);
  NvSciBufModuleClose(m1);
  NvSciBufModuleClose(m2);
}

}  // namespace
