// ABI of include/cudla.h against NVIDIA's cuDLA API reference and header (LP64): sizes, offsets, enum values.
#include <gtest/gtest.h>

#include <cstddef>

#include "cudla.h"

static_assert(sizeof(cudlaExternalMemoryHandleDesc) == 16);
static_assert(offsetof(cudlaExternalMemoryHandleDesc, extBufObject) == 0);
static_assert(offsetof(cudlaExternalMemoryHandleDesc, size) == 8);
static_assert(sizeof(cudlaExternalSemaphoreHandleDesc) == 8);
static_assert(sizeof(cudlaDevHandle) == 8 && sizeof(cudlaModule) == 8);

static_assert(sizeof(cudlaModuleTensorDescriptor) == 168);
static_assert(offsetof(cudlaModuleTensorDescriptor, name) == 0);
static_assert(offsetof(cudlaModuleTensorDescriptor, size) == 88);
static_assert(offsetof(cudlaModuleTensorDescriptor, n) == 96);
static_assert(offsetof(cudlaModuleTensorDescriptor, c) == 104);
static_assert(offsetof(cudlaModuleTensorDescriptor, h) == 112);
static_assert(offsetof(cudlaModuleTensorDescriptor, w) == 120);
static_assert(offsetof(cudlaModuleTensorDescriptor, dataFormat) == 128);
static_assert(offsetof(cudlaModuleTensorDescriptor, dataType) == 129);
static_assert(offsetof(cudlaModuleTensorDescriptor, dataCategory) == 130);
static_assert(offsetof(cudlaModuleTensorDescriptor, pixelFormat) == 131);
static_assert(offsetof(cudlaModuleTensorDescriptor, pixelMapping) == 132);
static_assert(offsetof(cudlaModuleTensorDescriptor, stride) == 136);
static_assert(sizeof(((cudlaModuleTensorDescriptor*)nullptr)->name) == 81);

static_assert(sizeof(cudlaModuleAttribute) == 8);
static_assert(offsetof(cudlaModuleAttribute, numInputTensors) == 0);
static_assert(offsetof(cudlaModuleAttribute, numOutputTensors) == 0);
static_assert(offsetof(cudlaModuleAttribute, inputTensorDesc) == 0);
static_assert(offsetof(cudlaModuleAttribute, outputTensorDesc) == 0);

static_assert(sizeof(CudlaFence) == 16 && offsetof(CudlaFence, fence) == 0 && offsetof(CudlaFence, type) == 8);
static_assert(sizeof(cudlaWaitEvents) == 16 && offsetof(cudlaWaitEvents, preFences) == 0 &&
              offsetof(cudlaWaitEvents, numEvents) == 8);
static_assert(sizeof(cudlaSignalEvents) == 24 && offsetof(cudlaSignalEvents, devPtrs) == 0 &&
              offsetof(cudlaSignalEvents, eofFences) == 8 && offsetof(cudlaSignalEvents, numEvents) == 16);

static_assert(sizeof(cudlaTask) == 48);
static_assert(offsetof(cudlaTask, moduleHandle) == 0);
static_assert(offsetof(cudlaTask, outputTensor) == 8);
static_assert(offsetof(cudlaTask, numOutputTensors) == 16);
static_assert(offsetof(cudlaTask, numInputTensors) == 20);
static_assert(offsetof(cudlaTask, inputTensor) == 24);
static_assert(offsetof(cudlaTask, waitEvents) == 32);
static_assert(offsetof(cudlaTask, signalEvents) == 40);

static_assert(sizeof(cudlaDevAttribute) == 4);
static_assert(offsetof(cudlaDevAttribute, unifiedAddressingSupported) == 0);
static_assert(offsetof(cudlaDevAttribute, deviceVersion) == 0);

static_assert(sizeof(cudlaStatus) == 4 && sizeof(cudlaMode) == 4 && sizeof(cudlaFenceType) == 4);

TEST(CudlaAbi, StatusValues) {
  const std::pair<cudlaStatus, long> expected[] = {
      {cudlaSuccess, 0}, {cudlaErrorInvalidParam, 1}, {cudlaErrorOutOfResources, 2},
      {cudlaErrorCreationFailed, 3}, {cudlaErrorInvalidAddress, 4}, {cudlaErrorOs, 5}, {cudlaErrorCuda, 6},
      {cudlaErrorUmd, 7}, {cudlaErrorInvalidDevice, 8}, {cudlaErrorInvalidAttribute, 9},
      {cudlaErrorIncompatibleDlaSWVersion, 10}, {cudlaErrorMemoryRegistered, 11}, {cudlaErrorInvalidModule, 12},
      {cudlaErrorUnsupportedOperation, 13}, {cudlaErrorNvSci, 14}, {cudlaErrorDriverNotFound, 15},
      {cudlaErrorDlaErrInvalidInput, 0x40000001}, {cudlaErrorDlaErrInvalidPreAction, 0x40000002},
      {cudlaErrorDlaErrNoMem, 0x40000003}, {cudlaErrorDlaErrProcessorBusy, 0x40000004},
      {cudlaErrorDlaErrTaskStatusMismatch, 0x40000005}, {cudlaErrorDlaErrEngineTimeout, 0x40000006},
      {cudlaErrorDlaErrDataMismatch, 0x40000007}, {cudlaErrorUnknown, 0x7fffffff}};
  for (const auto& [s, v] : expected) EXPECT_EQ(long(s), v);
}

TEST(CudlaAbi, OtherEnumsAndMacros) {
  EXPECT_EQ(CUDLA_CUDA_DLA, 0);
  EXPECT_EQ(CUDLA_STANDALONE, 1);
  EXPECT_EQ(CUDLA_NVSCISYNC_ATTR_WAIT, 1);
  EXPECT_EQ(CUDLA_NVSCISYNC_ATTR_SIGNAL, 2);
  EXPECT_EQ(CUDLA_NUM_INPUT_TENSORS, 0);
  EXPECT_EQ(CUDLA_NUM_OUTPUT_TENSORS, 1);
  EXPECT_EQ(CUDLA_INPUT_TENSOR_DESCRIPTORS, 2);
  EXPECT_EQ(CUDLA_OUTPUT_TENSOR_DESCRIPTORS, 3);
  EXPECT_EQ(CUDLA_NUM_OUTPUT_TASK_STATISTICS, 4);
  EXPECT_EQ(CUDLA_OUTPUT_TASK_STATISTICS_DESCRIPTORS, 5);
  EXPECT_EQ(CUDLA_NVSCISYNC_FENCE, 1);
  EXPECT_EQ(CUDLA_NVSCISYNC_FENCE_SOF, 2);
  EXPECT_EQ(CUDLA_MODULE_DEFAULT, 0);
  EXPECT_EQ(CUDLA_MODULE_ENABLE_FAULT_DIAGNOSTICS, 1);
  EXPECT_EQ(CUDLA_SUBMIT_NOOP, 1);
  EXPECT_EQ(CUDLA_SUBMIT_SKIP_LOCK_ACQUIRE, 2);
  EXPECT_EQ(CUDLA_SUBMIT_DIAGNOSTICS_TASK, 4);
  EXPECT_EQ(CUDLA_READ_WRITE_PERM, 0);
  EXPECT_EQ(CUDLA_READ_ONLY_PERM, 1);
  EXPECT_EQ(CUDLA_TASK_STATISTICS, 2);
  EXPECT_EQ(CUDLA_UNIFIED_ADDRESSING, 0);
  EXPECT_EQ(CUDLA_DEVICE_VERSION, 1);
  EXPECT_EQ(CUDLA_DATA_FORMAT_NCxHWx, 3u);
  EXPECT_EQ(CUDLA_DATA_TYPE_UINT16, 6u);
  EXPECT_EQ(CUDLA_DATA_CATEGORY_BIAS, 4u);
  EXPECT_EQ(CUDLA_PIXEL_FORMAT_Y16___V16U16_N444, 35u);
  EXPECT_EQ(CUDLA_PIXEL_FORMAT_FEATURE, 36u);
  EXPECT_EQ(CUDLA_PIXEL_FORMAT_UNKNOWN, 37u);
  EXPECT_EQ(CUDLA_PIXEL_MAPPING_BLOCK_LINEAR, 1u);
  EXPECT_EQ(CUDLA_LOADABLE_TENSOR_DESC_NUM_STRIDES, 8u);
  EXPECT_EQ(CUDLA_RUNTIME_TENSOR_DESC_NAME_MAX_LEN, 80u);
}
