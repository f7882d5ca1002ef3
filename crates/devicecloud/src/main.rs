//! The `devicecloud` executable; everything but the allocator is in the library.

/// mimalloc rather than the system allocator: under bursts of large, short-lived allocations
/// (1 MB bodies, big filters, thousands of connections opening and closing) glibc's per-thread
/// arenas keep what was freed, and resident memory only grows (docs/benchmarks.md, "Abuse").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    devicecloud::run()
}
