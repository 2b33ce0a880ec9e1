#pragma once
// Transparent huge pages for one large buffer, asked for before it is first written.
//
// A buffer of tens of megabytes filled at once (a scheduling pass's 100,000 job views, 80,000
// actions, the copies of the jobs it placed) takes one page fault per 4 KiB page on first write;
// under a hypervisor each costs microseconds (64 MiB written first: 167 ms in 4 KiB pages, 3.9 ms
// with this advice on this project's VM, pass_bench's BM_FreshBuffer; memory the host has never
// backed still costs its first write either way, docs/performance.md). AdviseHugePages marks
// the 2 MiB pages that lie wholly inside [data, data + bytes) for transparent huge pages
// (madvise(MADV_HUGEPAGE)), so that the kernel maps them 2 MiB at a time. It changes no byte of
// the buffer and nothing outside it; where huge pages are off (transparent_hugepage "never") or
// the range holds no whole 2 MiB page, it does nothing. It is advice: the kernel falls back to
// 4 KiB pages when it has no huge page to give.

#include <cstddef>

namespace stoker {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Returns whether the kernel took the advice for at least one 2 MiB page.
bool AdviseHugePages(const void* data, size_t bytes);

// The storage of a vector (its capacity, not only its size): call right after reserve().
template <typename Vector>
bool AdviseHugePagesFor(const Vector& v) {
  return AdviseHugePages(v.data(), v.capacity() * sizeof(typename Vector::value_type));
}

}  // namespace stoker
