#pragma once
// A backend that hands every call to another one: derive from it to watch or replace one part
// of a backend (count its allocations, keep its launches from running) and keep the rest.
#include <memory>
#include <utility>
#include <vector>

#include "runtime_backend.hpp"

namespace flashjit::detail {

class ForwardingBackend : public RuntimeBackend {
 public:
  explicit ForwardingBackend(std::unique_ptr<RuntimeBackend> inner) : inner_(std::move(inner)) {}
  ~ForwardingBackend() override { release_held_buffers(); }

  Backend kind() const override { return inner_->kind(); }
  const DeviceInfo& info() const override { return inner_->info(); }
  void* allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  void free(void* data) noexcept override { inner_->free(data); }
  void* allocate_on_stream(std::size_t bytes, Stream stream) override {
    return inner_->allocate_on_stream(bytes, stream);
  }
  void free_on_stream(void* data, Stream stream) noexcept override {
    inner_->free_on_stream(data, stream);
  }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    inner_->copy_to_device(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    inner_->copy_to_host(dst, src, bytes);
  }
  void synchronize(Stream stream) override { inner_->synchronize(stream); }
  Executor& executor() override { return inner_->executor(); }
  DeviceContext* context() override { return inner_->context(); }
  std::vector<KernelWork>* counted_work() override { return inner_->counted_work(); }

 protected:
  RuntimeBackend& inner() { return *inner_; }

 private:
  std::unique_ptr<RuntimeBackend> inner_;
};

}  // namespace flashjit::detail
