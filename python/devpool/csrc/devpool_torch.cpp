// devpool as a real PyTorch CUDA allocator: a c10 CUDAAllocator over devpool's C ABI.
//
// Built by devpool.torch with torch.utils.cpp_extension against the user's PyTorch.
// What it keeps of PyTorch's own caching allocator's promises, and how:
//
// - Allocations go to devpool on the current device and stream. A DataPtr carries
//   the pointer as its context and devpool_delete as its deleter; the block is freed
//   on the stream it was allocated for (devpool_release), so it is reused at once on
//   that stream and elsewhere only after that stream's work, as in PyTorch.
// - record_stream goes to devpool_record_stream: the free then also waits for the
//   work queued on that stream (events, never a device-wide wait).
// - Statistics (memory_allocated/reserved, their peaks, memory_stats/summary,
//   reset_peak_memory_stats) are devpool's own figures, read as a struct.
// - empty_cache() trims devpool; out of memory raises torch.cuda.OutOfMemoryError with
//   devpool's message after PyTorch's own cached memory was given back and the
//   allocation retried once.
// - Private pools (CUDA graph capture, torch.compile's cudagraph trees, MemPool and
//   use_mem_pool) are served by PyTorch's own caching allocator, kept beside devpool:
//   those pools need address-exact checkpointing and graph-lifetime ownership, which
//   PyTorch implements and devpool does not duplicate. While such a pool is active on
//   a device, allocations its filter selects go to PyTorch's allocator; a MemPool made
//   with devpool's allocator draws its segments from devpool. Statistics add both.
// - Calls into devpool while a pool is active run in relaxed capture mode (as
//   PyTorch's allocator does around cudaMalloc), so they never invalidate a capture.

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "devpool.h"

namespace devpool_torch {

namespace CCA = c10::cuda::CUDACachingAllocator;
using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingDeviceAllocator::StatType;
using CCA::CUDAAllocator;

constexpr int kMaxDevices = 64;

// Messages are built with std::string alone: no iostreams in this extension (their
// locale machinery is not always initialized in a module loaded this way; formatting
// a number through an ostringstream crashed in one build).
inline void append(std::string& s, const std::string& v) {
  s += v;
}
inline void append(std::string& s, const char* v) {
  s += v != nullptr ? v : "(null)";
}
inline void append(std::string& s, const void* v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", v);
  s += buf;
}
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
inline void append(std::string& s, T v) {
  s += std::to_string(static_cast<long long>(v));
}
template <typename... Ts>
std::string cat(const Ts&... parts) {
  std::string s;
  (append(s, parts), ...);
  return s;
}


// The C ABI, looked up by name in the library the Python package loaded.
struct Api {
  decltype(&devpool_malloc) malloc = nullptr;
  decltype(&devpool_release) release = nullptr;
  decltype(&devpool_record_stream) record_stream = nullptr;
  decltype(&devpool_trim) trim = nullptr;
  decltype(&devpool_device_stats) device_stats = nullptr;
  decltype(&devpool_reset_peak_stats) reset_peak_stats = nullptr;
  decltype(&devpool_block_info) block_info = nullptr;
  decltype(&devpool_enable_peer_access) enable_peer_access = nullptr;
  decltype(&devpool_last_error) last_error = nullptr;

  void load(const std::string& path) {
    // RTLD_NOLOAD first: the Python package has loaded it already; same instance.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) {
      h = dlopen(path.c_str(), RTLD_NOW);
    }
    if (h == nullptr) {
      const char* why = dlerror();
      TORCH_CHECK(false, cat("devpool: cannot load ", path, ": ", why));
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      TORCH_CHECK(
          p != nullptr,
          cat("devpool: ",
              path,
              " has no symbol ",
              name,
              " (a library from another devpool version?)"));
      return p;
    };
    malloc = reinterpret_cast<decltype(malloc)>(sym("devpool_malloc"));
    release = reinterpret_cast<decltype(release)>(sym("devpool_release"));
    record_stream =
        reinterpret_cast<decltype(record_stream)>(sym("devpool_record_stream"));
    trim = reinterpret_cast<decltype(trim)>(sym("devpool_trim"));
    device_stats =
        reinterpret_cast<decltype(device_stats)>(sym("devpool_device_stats"));
    reset_peak_stats = reinterpret_cast<decltype(reset_peak_stats)>(
        sym("devpool_reset_peak_stats"));
    block_info =
        reinterpret_cast<decltype(block_info)>(sym("devpool_block_info"));
    enable_peer_access = reinterpret_cast<decltype(enable_peer_access)>(
        sym("devpool_enable_peer_access"));
    last_error =
        reinterpret_cast<decltype(last_error)>(sym("devpool_last_error"));
  }
};

Api api;

void devpool_delete(void* ptr);

// True on a thread while it is inside PyTorch's allocator on our behalf: a segment
// that allocator asks of us then goes straight to devpool.
thread_local bool in_native = false;

struct NativeScope {
  NativeScope() : prev_(in_native) {
    in_native = true;
  }
  ~NativeScope() {
    in_native = prev_;
  }
  bool prev_;
};

// An allocation window of a private pool (begin/endAllocateToPool).
struct Window {
  c10::DeviceIndex device;
  c10::MempoolId_t id;
  std::function<bool(cudaStream_t)> filter;
};

bool is_oom_message(const std::string& m) {
  return m.find("out of memory") != std::string::npos ||
      m.find("larger than") != std::string::npos;
}

std::string format_size(size_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

class DevpoolAllocator final : public CUDAAllocator {
 public:
  using CUDAAllocator::recordStream;

  DevpoolAllocator(CUDAAllocator* native, const std::string& lib_path)
      : native_(native), lib_path_(lib_path) {}

  // ---- allocation ----

  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex device = c10::cuda::current_device();
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
    if (windows_open_.load(std::memory_order_acquire) > 0 && !in_native &&
        routed_to_pool(device, stream)) {
      NativeScope scope;
      return native_->allocate(n);
    }
    const c10::Device dev(c10::DeviceType::CUDA, device);
    if (n == 0) {
      return {nullptr, nullptr, &devpool_delete, dev};
    }
    void* p = devpool_alloc(n, device, stream);
    return {p, p, &devpool_delete, dev};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &devpool_delete;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    C10_CUDA_CHECK(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice));
  }

  void* raw_alloc(size_t nbytes) override {
    const c10::DeviceIndex device = c10::cuda::current_device();
    return raw_alloc_with_stream(
        nbytes, c10::cuda::getCurrentCUDAStream(device).stream());
  }

  void* raw_alloc_with_stream(size_t nbytes, cudaStream_t stream) override {
    if (nbytes == 0) {
      return nullptr;
    }
    const c10::DeviceIndex device = c10::cuda::current_device();
    if (windows_open_.load(std::memory_order_acquire) > 0 && !in_native &&
        routed_to_pool(device, stream)) {
      NativeScope scope;
      return native_->raw_alloc_with_stream(nbytes, stream);
    }
    return devpool_alloc(nbytes, device, stream);
  }

  void raw_delete(void* ptr) override {
    free_any(ptr);
  }

  // Free a pointer of devpool's, or else of PyTorch's own allocator.
  void free_any(void* ptr) {
    if (ptr == nullptr) {
      return;
    }
    if (!deferred_by_capture(ptr)) {
      int rc;
      {
        auto guard = relaxed_if_pools_open();
        rc = api.release(ptr);
      }
      if (rc == DEVPOOL_OK) {
        return;
      }
      if (rc != DEVPOOL_ERR_NOT_FOUND) {
        TORCH_WARN(cat("devpool: freeing ", static_cast<const void*>(ptr), " failed: ", api.last_error()));
        return;
      }
      NativeScope scope;
      native_->raw_delete(ptr);
    }
  }

  // ---- streams ----

  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override {
    if (ptr.get() == nullptr) {
      return;
    }
    if (ptr.get_deleter() != &devpool_delete) {
      native_->recordStream(ptr, stream);
      return;
    }
    if (windows_open_.load(std::memory_order_acquire) > 0 &&
        stream_is_capturing(stream.stream())) {
      // An event recorded on a capturing stream is a graph node, not a point in
      // time: keep the block until the capture ends instead.
      std::lock_guard<std::mutex> g(windows_mu_);
      capture_held_.insert(ptr.get());
      return;
    }
    auto guard = relaxed_if_pools_open();
    const int rc =
        api.record_stream(ptr.get(), stream.device_index(), stream.stream());
    TORCH_CHECK(
        rc == DEVPOOL_OK,
        cat("devpool: record_stream of ",
            static_cast<const void*>(ptr.get()),
            " failed: ",
            api.last_error()));
  }

  // ---- lifecycle ----

  void init(int device_count) override {
    native_->init(device_count);
    initialized_.store(true);
  }

  bool initialized() override {
    return initialized_.load();
  }

  void emptyCache(c10::MempoolId_t mempool_id) override {
    if (mempool_id == c10::MempoolId_t{0, 0}) {
      if (windows_open_.load() == 0) {
        for (int d = 0; d < kMaxDevices; ++d) {
          if (used_[d].load(std::memory_order_relaxed)) {
            api.trim(d);
          }
        }
      }
    }
    native_->emptyCache(mempool_id);
  }

  void cacheInfo(c10::DeviceIndex device, size_t* largestBlock) override {
    size_t native_largest = 0;
    native_->cacheInfo(device, &native_largest);
    devpool_device_stats_t s = devpool_stats(device);
    const size_t cached = s.reserved_bytes.current > s.allocated_bytes.current
        ? s.reserved_bytes.current - s.allocated_bytes.current
        : 0;
    *largestBlock = std::max(native_largest, cached);
  }

  void* getBaseAllocation(void* ptr, size_t* size) override {
    size_t n = 0;
    void* base = api.block_info(ptr, &n, nullptr);
    if (base != nullptr) {
      if (size != nullptr) {
        *size = n;
      }
      return base;
    }
    return native_->getBaseAllocation(ptr, size);
  }

  // ---- statistics ----

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    DeviceStats s = native_->getDeviceStats(device);
    if (device < 0 || device >= kMaxDevices) {
      return s;
    }
    const devpool_device_stats_t d = devpool_stats(device);
    const devpool_device_stats_t& base = accumulated_base_[device];
    auto add = [](c10::CachingAllocator::Stat& st,
                  const devpool_counter_t& c,
                  const devpool_counter_t& b) {
      st.current += static_cast<int64_t>(c.current);
      st.peak += static_cast<int64_t>(c.peak);
      st.allocated += static_cast<int64_t>(c.allocated - std::min(c.allocated, b.allocated));
      st.freed += static_cast<int64_t>(c.freed - std::min(c.freed, b.freed));
    };
    // devpool's blocks are reported under "all" and "large_pool".
    for (auto t : {StatType::AGGREGATE, StatType::LARGE_POOL}) {
      const auto i = static_cast<size_t>(t);
      add(s.allocation[i], d.blocks, base.blocks);
      add(s.active[i], d.blocks, base.blocks);
      add(s.allocated_bytes[i], d.allocated_bytes, base.allocated_bytes);
      add(s.active_bytes[i], d.allocated_bytes, base.allocated_bytes);
      add(s.requested_bytes[i], d.requested_bytes, base.requested_bytes);
      add(s.reserved_bytes[i], d.reserved_bytes, base.reserved_bytes);
      s.segment[i].current += static_cast<int64_t>(d.segments);
      s.segment[i].peak = std::max(s.segment[i].peak, s.segment[i].current);
    }
    s.num_ooms += ooms_[device].load();
    s.num_alloc_retries += retries_[device].load();
    s.num_device_alloc += static_cast<int64_t>(d.backend_memory_calls);
    return s;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    native_->resetAccumulatedStats(device);
    if (device < 0 || device >= kMaxDevices) {
      return;
    }
    accumulated_base_[device] = devpool_stats(device);
    ooms_[device].store(0);
    retries_[device].store(0);
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    native_->resetPeakStats(device);
    api.reset_peak_stats(device);
  }

  // ---- private pools: PyTorch's own allocator serves them ----

  void beginAllocateToPool(
      c10::DeviceIndex device,
      c10::MempoolId_t mempool_id,
      std::function<bool(cudaStream_t)> filter) override {
    native_->beginAllocateToPool(device, mempool_id, filter);
    std::lock_guard<std::mutex> g(windows_mu_);
    windows_.push_back(Window{device, mempool_id, std::move(filter)});
    windows_open_.store(static_cast<int>(windows_.size()), std::memory_order_release);
  }

  void endAllocateToPool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    native_->endAllocateToPool(device, mempool_id);
    std::vector<void*> held;
    {
      std::lock_guard<std::mutex> g(windows_mu_);
      windows_.erase(
          std::remove_if(
              windows_.begin(),
              windows_.end(),
              [&](const Window& w) { return w.device == device && w.id == mempool_id; }),
          windows_.end());
      windows_open_.store(static_cast<int>(windows_.size()), std::memory_order_release);
      if (windows_.empty()) {
        held.assign(deferred_.begin(), deferred_.end());
        deferred_.clear();
        capture_held_.clear();
      }
    }
    // Blocks freed during a capture after being declared used by the capturing
    // stream: their free waits for the work queued so far on every device.
    if (!held.empty()) {
      C10_CUDA_CHECK(cudaDeviceSynchronize());
      for (void* p : held) {
        api.release(p);
      }
    }
  }

  void releasePool(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    native_->releasePool(device, mempool_id);
  }

  int getPoolUseCount(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    return native_->getPoolUseCount(device, mempool_id);
  }

  void createOrIncrefPool(
      c10::DeviceIndex device,
      c10::MempoolId_t mempool_id,
      std::shared_ptr<CUDAAllocator> allocator) override {
    native_->createOrIncrefPool(device, mempool_id, std::move(allocator));
  }

  void setUseOnOOM(c10::DeviceIndex device, c10::MempoolId_t mempool_id, bool use_on_oom)
      override {
    native_->setUseOnOOM(device, mempool_id, use_on_oom);
  }

  void setNoSplit(c10::DeviceIndex device, c10::MempoolId_t mempool_id) override {
    native_->setNoSplit(device, mempool_id);
  }

  bool checkPoolLiveAllocations(
      c10::DeviceIndex device,
      c10::MempoolId_t mempool_id,
      const std::unordered_set<void*>& expected_live_allocations) override {
    return native_->checkPoolLiveAllocations(device, mempool_id, expected_live_allocations);
  }

  std::shared_ptr<CCA::AllocatorState> getCheckpointState(
      c10::DeviceIndex device,
      c10::MempoolId_t id) override {
    return native_->getCheckpointState(device, id);
  }

  CCA::CheckpointDelta setCheckpointPoolState(
      c10::DeviceIndex device,
      std::shared_ptr<CCA::AllocatorState> pps) override {
    return native_->setCheckpointPoolState(device, std::move(pps));
  }

  CCA::SnapshotInfo snapshot(c10::MempoolId_t mempool_id, bool include_traces) override {
    return native_->snapshot(mempool_id, include_traces);
  }

  // ---- the rest: PyTorch's allocator where it applies ----

  double getMemoryFraction(c10::DeviceIndex device) override {
    return native_->getMemoryFraction(device);
  }

  void setMemoryFraction(double fraction, c10::DeviceIndex device) override {
    TORCH_WARN_ONCE(
        "devpool: set_per_process_memory_fraction limits only PyTorch's own pools "
        "(CUDA graphs, MemPool), not devpool's allocations");
    native_->setMemoryFraction(fraction, device);
  }

  std::vector<CCA::StreamSegmentSize> getExpandableSegmentSizes(
      c10::DeviceIndex device) override {
    return native_->getExpandableSegmentSizes(device);
  }

  void enable(bool value) override {
    native_->enable(value);
  }

  bool isEnabled() const override {
    return native_->isEnabled();
  }

  CCA::ShareableHandle shareIpcHandle(void* ptr) override {
    TORCH_CHECK(
        api.block_info(ptr, nullptr, nullptr) == nullptr,
        "devpool: sharing CUDA memory between processes (IPC) is not supported for "
        "devpool's blocks; keep tensors shared between processes in a "
        "torch.cuda.MemPool made without devpool");
    return native_->shareIpcHandle(ptr);
  }

  std::shared_ptr<void> getIpcDevPtr(std::string handle) override {
    return native_->getIpcDevPtr(std::move(handle));
  }

  bool isHistoryEnabled() override {
    return native_->isHistoryEnabled();
  }

  void recordHistory(
      bool enabled,
      CCA::CreateContextFn context_recorder,
      size_t alloc_trace_max_entries,
      CCA::RecordContext when,
      bool clearHistory,
      const std::vector<std::string>& skip_actions) override {
    if (enabled) {
      TORCH_WARN_ONCE(
          "devpool: memory history records only the allocations PyTorch's own "
          "allocator serves (CUDA graphs, MemPool); devpool's own are not traced");
    }
    native_->recordHistory(
        enabled, context_recorder, alloc_trace_max_entries, when, clearHistory, skip_actions);
  }

  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) override {
    native_->recordAnnotation(md);
  }

  void pushCompileContext(std::string& md) override {
    native_->pushCompileContext(md);
  }

  void popCompileContext() override {
    native_->popCompileContext();
  }

  void attachOutOfMemoryObserver(CCA::OutOfMemoryObserver observer) override {
    {
      std::lock_guard<std::mutex> g(windows_mu_);
      oom_observers_.push_back(observer);
    }
    native_->attachOutOfMemoryObserver(std::move(observer));
  }

  void attachAllocatorTraceTracker(CCA::AllocatorTraceTracker tracker) override {
    native_->attachAllocatorTraceTracker(std::move(tracker));
  }

  void enablePeerAccess(c10::DeviceIndex dev, c10::DeviceIndex dev_to_access) override {
    native_->enablePeerAccess(dev, dev_to_access);
    // `dev` reads memory that `dev_to_access` holds.
    const int rc = api.enable_peer_access(dev_to_access, dev);
    TORCH_CHECK(
        rc == DEVPOOL_OK,
        cat("devpool: peer access from device ",
            static_cast<int>(dev),
            " to ",
            static_cast<int>(dev_to_access),
            " failed: ",
            api.last_error()));
  }

  cudaError_t memcpyAsync(
      void* dst,
      int dstDevice,
      const void* src,
      int srcDevice,
      size_t count,
      cudaStream_t stream,
      bool p2p_enabled) override {
    if (p2p_enabled || dstDevice == srcDevice) {
      return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
    }
    return cudaMemcpyPeerAsync(dst, dstDevice, src, srcDevice, count, stream);
  }

  std::string name() override {
    return "devpool";
  }

  const std::string& lib_path() const {
    return lib_path_;
  }

  int64_t ooms(c10::DeviceIndex device) const {
    return ooms_[device].load();
  }

  // A block whose free must wait for a capture to end: true if it was kept.
  bool deferred_by_capture(void* ptr) {
    if (windows_open_.load(std::memory_order_acquire) == 0) {
      return false;
    }
    std::lock_guard<std::mutex> g(windows_mu_);
    if (windows_.empty() || capture_held_.count(ptr) == 0) {
      return false;
    }
    capture_held_.erase(ptr);
    deferred_.push_back(ptr);
    return true;
  }

 private:
  // Whether an allocation on (device, stream) belongs to an open private pool.
  bool routed_to_pool(c10::DeviceIndex device, cudaStream_t stream) {
    std::lock_guard<std::mutex> g(windows_mu_);
    for (const Window& w : windows_) {
      if (w.device == device && w.filter(stream)) {
        return true;
      }
    }
    return false;
  }

  static bool stream_is_capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return status != cudaStreamCaptureStatusNone;
  }

  // Relaxed capture mode around calls into devpool while a private pool is open.
  std::unique_ptr<c10::cuda::CUDAStreamCaptureModeGuard> relaxed_if_pools_open() {
    if (windows_open_.load(std::memory_order_acquire) == 0) {
      return nullptr;
    }
    return std::make_unique<c10::cuda::CUDAStreamCaptureModeGuard>(
        cudaStreamCaptureModeRelaxed);
  }

  devpool_device_stats_t devpool_stats(c10::DeviceIndex device) {
    devpool_device_stats_t s{};
    if (device >= 0 && device < kMaxDevices) {
      api.device_stats(device, &s);
    }
    return s;
  }

  void* devpool_alloc(size_t n, c10::DeviceIndex device, cudaStream_t stream) {
    used_[device].store(true, std::memory_order_relaxed);
    auto guard = relaxed_if_pools_open();
    void* p = api.malloc(n, device, stream);
    if (p != nullptr) {
      return p;
    }
    std::string msg = api.last_error();
    if (!is_oom_message(msg)) {
      TORCH_CHECK(
          false,
          cat("devpool: allocating ", format_size(n), " on device ",
              static_cast<int>(device), " failed: ", msg));
    }
    // Give PyTorch's own cached memory back and try once more.
    retries_[device].fetch_add(1);
    {
      NativeScope scope;
      native_->emptyCache(c10::MempoolId_t{0, 0});
    }
    p = api.malloc(n, device, stream);
    if (p != nullptr) {
      return p;
    }
    msg = api.last_error();
    ooms_[device].fetch_add(1);
    size_t free_b = 0;
    size_t total_b = 0;
    {
      c10::cuda::CUDAGuard dg(device);
      if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
      }
    }
    const devpool_device_stats_t s = devpool_stats(device);
    std::vector<CCA::OutOfMemoryObserver> observers;
    {
      std::lock_guard<std::mutex> g(windows_mu_);
      observers = oom_observers_;
    }
    for (const auto& obs : observers) {
      obs(device, s.allocated_bytes.current, total_b, free_b);
    }
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        cat("CUDA out of memory (devpool). Tried to allocate ",
            format_size(n),
            ". GPU ",
            static_cast<int>(device),
            " has a total capacity of ",
            format_size(total_b),
            " of which ",
            format_size(free_b),
            " is free. devpool holds ",
            format_size(s.reserved_bytes.current),
            ", of which ",
            format_size(s.allocated_bytes.current),
            " is allocated to tensors. devpool: ",
            msg));
    return nullptr; // not reached: TORCH_CHECK_WITH threw
  }

  CUDAAllocator* native_;
  std::string lib_path_;
  std::atomic<bool> initialized_{false};
  std::mutex windows_mu_;
  std::vector<Window> windows_;
  std::atomic<int> windows_open_{0};
  std::unordered_set<void*> capture_held_;
  std::vector<void*> deferred_;
  std::vector<CCA::OutOfMemoryObserver> oom_observers_;
  std::array<std::atomic<bool>, kMaxDevices> used_{};
  std::array<std::atomic<int64_t>, kMaxDevices> ooms_{};
  std::array<std::atomic<int64_t>, kMaxDevices> retries_{};
  std::array<devpool_device_stats_t, kMaxDevices> accumulated_base_{};
};

std::mutex instance_mu;
std::shared_ptr<DevpoolAllocator> instance;
// The same object as a plain pointer, for deleters: it is never destroyed, so it
// stays valid for DataPtrs freed during the process's exit, after `instance`.
std::atomic<DevpoolAllocator*> raw_instance{nullptr};

void devpool_delete(void* ptr) {
  raw_instance.load(std::memory_order_acquire)->free_any(ptr);
}

// The one allocator of this process, made on first call over the library at
// `lib_path`, with the allocator PyTorch has now as its helper for private pools.
std::shared_ptr<CUDAAllocator> allocator(const std::string& lib_path) {
  std::lock_guard<std::mutex> g(instance_mu);
  if (instance) {
    TORCH_CHECK(
        instance->lib_path() == lib_path,
        cat("devpool: the allocator is already bound to ", instance->lib_path()));
    return instance;
  }
  CUDAAllocator* native = CCA::get();
  TORCH_CHECK(native != nullptr, "devpool: PyTorch has no CUDA allocator to keep beside devpool");
  TORCH_CHECK(
      native->name() != "devpool",
      "devpool: PyTorch's current allocator is already a devpool allocator");
  api.load(lib_path);
  instance = std::make_shared<DevpoolAllocator>(native, lib_path);
  // Never destroyed: DataPtrs may outlive the Python module (freed at exit).
  new std::shared_ptr<DevpoolAllocator>(instance);
  raw_instance.store(instance.get(), std::memory_order_release);
  return instance;
}

bool is_current() {
  CUDAAllocator* cur = CCA::get();
  return cur != nullptr && instance && cur == instance.get();
}

int64_t oom_count(int device) {
  return instance ? instance->ooms(static_cast<c10::DeviceIndex>(device)) : 0;
}

} // namespace devpool_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "devpool's PyTorch CUDA allocator (a c10 CUDAAllocator over devpool's C ABI)";
  m.def(
      "allocator",
      &devpool_torch::allocator,
      "devpool's CUDAAllocator over the library at the given path (made once)");
  m.def("is_current", &devpool_torch::is_current, "whether devpool is PyTorch's CUDA allocator");
  m.def("oom_count", &devpool_torch::oom_count, "out-of-memory errors raised on a device");
}
