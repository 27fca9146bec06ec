// NvSciSync against its documented semantics: reconcile (one signaler, a waiter), fences in timeline
// order, waits with timeouts, cleared and duplicated fences, misused handles answered with errors.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "nvscisync.h"

namespace {

struct SyncFixture : ::testing::Test {
  NvSciSyncModule module = nullptr;
  NvSciSyncCpuWaitContext ctx = nullptr;
  std::vector<NvSciSyncAttrList> lists;
  std::vector<NvSciSyncObj> objs;
  void SetUp() override {
    ASSERT_EQ(NvSciSyncModuleOpen(&module), NvSciError_Success);
    ASSERT_EQ(NvSciSyncCpuWaitContextAlloc(module, &ctx), NvSciError_Success);
  }
  void TearDown() override {
    for (auto o : objs) NvSciSyncObjFree(o);
    for (auto l : lists) NvSciSyncAttrListFree(l);
    NvSciSyncCpuWaitContextFree(ctx);
    NvSciSyncModuleClose(module);
  }
  NvSciSyncAttrList cpu_list(NvSciSyncAccessPerm perm, bool cpu = true) {
    NvSciSyncAttrList l = nullptr;
    EXPECT_EQ(NvSciSyncAttrListCreate(module, &l), NvSciError_Success);
    lists.push_back(l);
    NvSciSyncAttrKeyValuePair kv[] = {{NvSciSyncAttrKey_NeedCpuAccess, &cpu, sizeof(cpu)},
                                      {NvSciSyncAttrKey_RequiredPerm, &perm, sizeof(perm)}};
    EXPECT_EQ(NvSciSyncAttrListSetAttrs(l, kv, 2), NvSciError_Success);
    return l;
  }
  NvSciError reconcile(std::vector<NvSciSyncAttrList> in, NvSciSyncAttrList* out) {
    NvSciSyncAttrList r = nullptr, c = nullptr;
    NvSciError e = NvSciSyncAttrListReconcile(in.data(), in.size(), &r, &c);
    if (r) lists.push_back(r);
    if (c) lists.push_back(c);
    *out = e == NvSciError_Success ? r : c;
    return e;
  }
  NvSciSyncObj cpu_object() {
    NvSciSyncAttrList r = nullptr;
    EXPECT_EQ(reconcile({cpu_list(NvSciSyncAccessPerm_SignalOnly), cpu_list(NvSciSyncAccessPerm_WaitOnly)}, &r),
              NvSciError_Success);
    NvSciSyncObj o = nullptr;
    EXPECT_EQ(NvSciSyncObjAlloc(r, &o), NvSciError_Success);
    objs.push_back(o);
    return o;
  }
};

TEST_F(SyncFixture, ReconcileNeedsExactlyOneSignalerAndAWaiter) {
  NvSciSyncAttrList r = nullptr;
  ASSERT_EQ(reconcile({cpu_list(NvSciSyncAccessPerm_SignalOnly), cpu_list(NvSciSyncAccessPerm_WaitOnly)}, &r),
            NvSciError_Success);
  NvSciSyncAttrKeyValuePair kv = {NvSciSyncAttrKey_ActualPerm, nullptr, 0};
  ASSERT_EQ(NvSciSyncAttrListGetAttrs(r, &kv, 1), NvSciError_Success);
  ASSERT_EQ(kv.len, sizeof(NvSciSyncAccessPerm));
  EXPECT_EQ(*static_cast<const NvSciSyncAccessPerm*>(kv.value), NvSciSyncAccessPerm_WaitSignal);
  bool reconciled = false;
  ASSERT_EQ(NvSciSyncAttrListIsReconciled(r, &reconciled), NvSciError_Success);
  EXPECT_TRUE(reconciled);

  NvSciSyncAttrList c = nullptr;
  EXPECT_EQ(reconcile({cpu_list(NvSciSyncAccessPerm_SignalOnly), cpu_list(NvSciSyncAccessPerm_SignalOnly),
                       cpu_list(NvSciSyncAccessPerm_WaitOnly)},
                      &c),
            NvSciError_ReconciliationFailed);  // two signalers
  ASSERT_NE(c, nullptr);
  NvSciSyncObj o = nullptr;
  EXPECT_EQ(NvSciSyncObjAlloc(c, &o), NvSciError_BadParameter);
  EXPECT_EQ(reconcile({cpu_list(NvSciSyncAccessPerm_WaitOnly)}, &c), NvSciError_ReconciliationFailed);  // no signaler
  EXPECT_EQ(reconcile({cpu_list(NvSciSyncAccessPerm_SignalOnly)}, &c), NvSciError_ReconciliationFailed);  // no waiter
  EXPECT_EQ(reconcile({cpu_list(NvSciSyncAccessPerm_WaitSignal)}, &c), NvSciError_Success);  // one list, both
}

TEST_F(SyncFixture, FencesExpireInTimelineOrder) {
  NvSciSyncObj o = cpu_object();
  NvSciSyncFence f1 = NvSciSyncFenceInitializer, f2 = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(o, &f1), NvSciError_Success);
  ASSERT_EQ(NvSciSyncObjGenerateFence(o, &f2), NvSciError_Success);
  EXPECT_EQ(NvSciSyncFenceWait(&f1, ctx, 0), NvSciError_Timeout);
  ASSERT_EQ(NvSciSyncObjSignal(o), NvSciError_Success);
  EXPECT_EQ(NvSciSyncFenceWait(&f1, ctx, 0), NvSciError_Success);
  EXPECT_EQ(NvSciSyncFenceWait(&f2, ctx, 1000), NvSciError_Timeout);
  ASSERT_EQ(NvSciSyncObjSignal(o), NvSciError_Success);
  EXPECT_EQ(NvSciSyncFenceWait(&f2, ctx, -1), NvSciError_Success);
  EXPECT_EQ(NvSciSyncFenceWait(&f1, ctx, -1), NvSciError_Success);  // stays expired
  uint64_t id1 = 0, v1 = 0, id2 = 0, v2 = 0;
  ASSERT_EQ(NvSciSyncFenceExtractFence(&f1, &id1, &v1), NvSciError_Success);
  ASSERT_EQ(NvSciSyncFenceExtractFence(&f2, &id2, &v2), NvSciError_Success);
  EXPECT_EQ(id1, id2);
  EXPECT_LT(v1, v2);
}

TEST_F(SyncFixture, WaitTimesOutThenWakesWhenAnotherThreadSignals) {
  NvSciSyncObj o = cpu_object();
  NvSciSyncFence f = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(o, &f), NvSciError_Success);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(NvSciSyncFenceWait(&f, ctx, 20'000), NvSciError_Timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(19));
  std::thread signaler([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(NvSciSyncObjSignal(o), NvSciError_Success);
  });
  EXPECT_EQ(NvSciSyncFenceWait(&f, ctx, 10'000'000), NvSciError_Success);
  signaler.join();
}

TEST_F(SyncFixture, ManyWaitersOneSignal) {
  NvSciSyncObj o = cpu_object();
  NvSciSyncFence f = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(o, &f), NvSciError_Success);
  std::atomic<int> woke{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i)
    waiters.emplace_back([&] {
      NvSciSyncFence mine = NvSciSyncFenceInitializer;
      EXPECT_EQ(NvSciSyncFenceDup(&f, &mine), NvSciError_Success);
      if (NvSciSyncFenceWait(&mine, ctx, -1) == NvSciError_Success) ++woke;
      NvSciSyncFenceClear(&mine);
    });
  ASSERT_EQ(NvSciSyncObjSignal(o), NvSciError_Success);
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woke.load(), 4);
}

TEST_F(SyncFixture, ClearedAndDuplicatedFences) {
  NvSciSyncObj o = cpu_object();
  NvSciSyncFence f = NvSciSyncFenceInitializer, d = NvSciSyncFenceInitializer;
  EXPECT_EQ(NvSciSyncFenceWait(&f, ctx, 0), NvSciError_Success);  // a cleared fence is expired
  uint64_t id = 0, v = 0;
  EXPECT_EQ(NvSciSyncFenceExtractFence(&f, &id, &v), NvSciError_ClearedFence);
  ASSERT_EQ(NvSciSyncObjGenerateFence(o, &f), NvSciError_Success);
  ASSERT_EQ(NvSciSyncFenceDup(&f, &d), NvSciError_Success);
  NvSciSyncFenceClear(&f);
  EXPECT_EQ(NvSciSyncFenceWait(&f, ctx, 0), NvSciError_Success);
  EXPECT_EQ(NvSciSyncFenceWait(&d, ctx, 0), NvSciError_Timeout);  // the duplicate is its own value
  NvSciSyncFence garbage = {{1, 2, 3, 0, 0, 0}};
  EXPECT_EQ(NvSciSyncFenceWait(&garbage, ctx, 0), NvSciError_BadParameter);
  EXPECT_EQ(NvSciSyncFenceDup(&garbage, &d), NvSciError_BadParameter);
}

TEST_F(SyncFixture, SignalNeedsCpuSignalPermission) {
  NvSciSyncAttrList r = nullptr;
  ASSERT_EQ(reconcile({cpu_list(NvSciSyncAccessPerm_SignalOnly, false), cpu_list(NvSciSyncAccessPerm_WaitOnly, false)},
                      &r),
            NvSciError_Success);
  NvSciSyncObj o = nullptr;
  ASSERT_EQ(NvSciSyncObjAlloc(r, &o), NvSciError_Success);
  objs.push_back(o);
  EXPECT_EQ(NvSciSyncObjSignal(o), NvSciError_BadParameter);
}

TEST_F(SyncFixture, UseAfterFreeIsAnErrorNotACrash) {
  NvSciSyncObj o = cpu_object();
  NvSciSyncObj dup = nullptr;
  ASSERT_EQ(NvSciSyncObjDup(o, &dup), NvSciError_Success);
  NvSciSyncFence f = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(o, &f), NvSciError_Success);
  NvSciSyncObjFree(o);
  objs.clear();
  EXPECT_EQ(NvSciSyncObjSignal(o), NvSciError_BadParameter);
  EXPECT_EQ(NvSciSyncObjGenerateFence(o, &f), NvSciError_BadParameter);
  ASSERT_EQ(NvSciSyncObjSignal(dup), NvSciError_Success);  // the duplicate keeps the timeline
  EXPECT_EQ(NvSciSyncFenceWait(&f, ctx, 0), NvSciError_Success);
  NvSciSyncFence pending = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(dup, &pending), NvSciError_Success);
  NvSciSyncObjFree(dup);
  NvSciSyncObjFree(dup);
  EXPECT_EQ(NvSciSyncFenceWait(&pending, ctx, -1), NvSciError_BadParameter);  // nobody can signal it now
  NvSciSyncFenceClear(&pending);  // the sample clears fences after freeing their objects

  NvSciSyncCpuWaitContext freed = nullptr;
  ASSERT_EQ(NvSciSyncCpuWaitContextAlloc(module, &freed), NvSciError_Success);
  NvSciSyncCpuWaitContextFree(freed);
  EXPECT_EQ(NvSciSyncFenceWait(&pending, freed, 0), NvSciError_BadParameter);
  EXPECT_EQ(NvSciSyncFenceWait(&pending, nullptr, 0), NvSciError_BadParameter);
  EXPECT_EQ(NvSciSyncFenceWait(nullptr, ctx, 0), NvSciError_BadParameter);
  EXPECT_EQ(NvSciSyncFenceWait(&pending, ctx, -2), NvSciError_BadParameter);
  EXPECT_EQ(NvSciSyncObjSignal(reinterpret_cast<NvSciSyncObj>(ctx)), NvSciError_BadParameter);  // wrong type
  NvSciSyncAttrList l = nullptr;
  EXPECT_EQ(NvSciSyncAttrListCreate(reinterpret_cast<NvSciSyncModule>(ctx), &l), NvSciError_BadParameter);
  NvSciSyncObjFree(nullptr);
  NvSciSyncAttrListFree(nullptr);
  NvSciSyncCpuWaitContextFree(nullptr);
  NvSciSyncModuleClose(nullptr);
  NvSciSyncFenceClear(nullptr);
}

TEST_F(SyncFixture, SetAttrsRules) {
  NvSciSyncAttrList l = nullptr;
  ASSERT_EQ(NvSciSyncAttrListCreate(module, &l), NvSciError_Success);
  lists.push_back(l);
  NvSciSyncAccessPerm perm = NvSciSyncAccessPerm_WaitOnly, bad = static_cast<NvSciSyncAccessPerm>(0x40);
  NvSciSyncAttrKeyValuePair p = {NvSciSyncAttrKey_RequiredPerm, &perm, sizeof(perm)};
  NvSciSyncAttrKeyValuePair b = {NvSciSyncAttrKey_RequiredPerm, &bad, sizeof(bad)};
  NvSciSyncAttrKeyValuePair actual = {NvSciSyncAttrKey_ActualPerm, &perm, sizeof(perm)};
  EXPECT_EQ(NvSciSyncAttrListSetAttrs(l, &b, 1), NvSciError_BadParameter);
  EXPECT_EQ(NvSciSyncAttrListSetAttrs(l, &actual, 1), NvSciError_BadParameter);  // an output key
  ASSERT_EQ(NvSciSyncAttrListSetAttrs(l, &p, 1), NvSciError_Success);
  EXPECT_EQ(NvSciSyncAttrListSetAttrs(l, &p, 1), NvSciError_BadParameter);  // set once
  NvSciSyncAttrKeyValuePair g = {NvSciSyncAttrKey_NeedCpuAccess, nullptr, 0};
  ASSERT_EQ(NvSciSyncAttrListGetAttrs(l, &g, 1), NvSciError_Success);
  EXPECT_EQ(g.value, nullptr);
}

}  // namespace
