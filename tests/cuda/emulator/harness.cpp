// The driver of the CUDA emulator (tests/helpers/cuda_emulator.py builds and runs it):
//
//   harness CALL_FILE OUT_FILE
//
// reads one launch (kernel name, grid, block, buffers, arguments) from CALL_FILE, runs it on
// the CPU and writes every buffer, after the run, to OUT_FILE. The build names two files:
//   EMU_SOURCES_FILE   #include lines of the kernel sources (.cu), compiled after the emulator
//   EMU_REGISTER_FILE  lines EMU_KERNEL(name), the extern "C" kernels a call may name
//
// CALL_FILE, little-endian: "FBEMU2\0\0"; u32 name length, name; grid 3 x u32; block 3 x u32;
// u64 dynamic shared memory bytes per block; u8 cooperative (1: all blocks run at once, 0: one
// after another); u32 buffer count, then per buffer u64 nbytes and the bytes; u32 argument
// count, then per argument u8 kind: 0 pointer (u32 buffer, u64 byte offset), 1 null pointer,
// 2 scalar (u8 size, then that many bytes). Each buffer is its own malloc of exactly nbytes, so
// that ASan reports any access past its end.
#include <string>  // the harness's own; the kernels come after the emulator

#include "cuda_emulator.hpp"

#include EMU_SOURCES_FILE

namespace emu_harness {

[[noreturn]] __attribute__((format(printf, 1, 2))) void die(const char* fmt, ...) {
    std::fprintf(stderr, "cuda emulator harness: ");
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "\n");
    std::exit(2);
}

struct Arg {
    uint8_t kind = 0;
    uint32_t buffer = 0;
    uint64_t offset = 0;
    uint8_t size = 0;
    unsigned char bytes[8] = {};
};

struct Call {
    std::vector<unsigned char> file;
    size_t pos = 0;
    std::string name;
    dim3 grid, block;
    uint64_t shared_bytes = 0;
    bool cooperative = false;
    std::vector<unsigned char*> buffers;
    std::vector<uint64_t> sizes;
    std::vector<Arg> args;
    size_t next_arg = 0;

    void read(void* dst, size_t n) {
        if (n > file.size() - pos) die("the call file is truncated");
        std::memcpy(dst, file.data() + pos, n);
        pos += n;
    }
    template <class T>
    T take() {
        T v;
        read(&v, sizeof v);  // little-endian, as the host
        return v;
    }

    // The next kernel argument as the kernel's parameter type T.
    template <class T>
    T get() {
        const size_t i = next_arg++;
        const Arg& a = args.at(i);
        if constexpr (std::is_pointer_v<T>) {
            if (a.kind == 1) return nullptr;
            if (a.kind != 0)
                die("argument %zu of %s: the kernel takes a pointer, the call passes a %u-byte "
                    "scalar", i, name.c_str(), unsigned(a.size));
            return reinterpret_cast<T>(buffers[a.buffer] + a.offset);
        } else {
            static_assert(std::is_trivially_copyable_v<T>, "kernel parameters are copied bytes");
            if (a.kind != 2)
                die("argument %zu of %s: the kernel takes a %zu-byte scalar, the call passes a "
                    "pointer", i, name.c_str(), sizeof(T));
            if (a.size != sizeof(T))
                die("argument %zu of %s: the kernel takes a %zu-byte scalar, the call passes %u "
                    "bytes", i, name.c_str(), sizeof(T), unsigned(a.size));
            T v;
            std::memcpy(&v, a.bytes, sizeof v);
            return v;
        }
    }
};

void parse(Call& c) {
    char magic[8];
    c.read(magic, 8);
    if (std::memcmp(magic, "FBEMU2\0\0", 8) != 0) die("not a call file (bad magic)");
    c.name.resize(c.take<uint32_t>());
    c.read(c.name.data(), c.name.size());
    uint32_t dims[6];  // one by one: the order of a call's arguments is unspecified
    for (uint32_t& d : dims) d = c.take<uint32_t>();
    c.grid = dim3(dims[0], dims[1], dims[2]);
    c.block = dim3(dims[3], dims[4], dims[5]);
    c.shared_bytes = c.take<uint64_t>();
    const uint8_t cooperative = c.take<uint8_t>();
    if (cooperative > 1) die("cooperative flag %u is not 0 or 1", unsigned(cooperative));
    c.cooperative = cooperative == 1;
    const uint32_t nbuf = c.take<uint32_t>();
    for (uint32_t b = 0; b < nbuf; ++b) {
        const uint64_t n = c.take<uint64_t>();
        if (n > c.file.size() - c.pos) die("buffer %u: the call file is truncated", b);
        unsigned char* p = static_cast<unsigned char*>(std::malloc(n ? n : 1));
        if (!p) die("buffer %u: out of memory for %llu bytes", b, (unsigned long long)n);
        c.read(p, n);
        c.buffers.push_back(p);
        c.sizes.push_back(n);
    }
    const uint32_t nargs = c.take<uint32_t>();
    for (uint32_t i = 0; i < nargs; ++i) {
        Arg a;
        a.kind = c.take<uint8_t>();
        if (a.kind == 0) {
            a.buffer = c.take<uint32_t>();
            a.offset = c.take<uint64_t>();
            if (a.buffer >= nbuf) die("argument %u: no buffer %u", i, a.buffer);
            if (a.offset > c.sizes[a.buffer])
                die("argument %u: offset %llu past the end of buffer %u", i,
                    (unsigned long long)a.offset, a.buffer);
        } else if (a.kind == 2) {
            a.size = c.take<uint8_t>();
            if (a.size != 4 && a.size != 8)
                die("argument %u: scalar of %u bytes", i, unsigned(a.size));
            c.read(a.bytes, a.size);
        } else if (a.kind != 1) {
            die("argument %u: unknown kind %u", i, unsigned(a.kind));
        }
        c.args.push_back(a);
    }
    if (c.pos != c.file.size()) die("trailing bytes after the arguments");
}

template <class... A>
void invoke_kernel(const char* name, void (*kernel)(A...), Call& c) {
    if (c.args.size() != sizeof...(A))
        die("kernel %s takes %zu arguments, the call passes %zu", name, sizeof...(A),
            c.args.size());
    // Brace initialisation evaluates left to right: the arguments are read in order.
    std::tuple<std::decay_t<A>...> t{c.get<std::decay_t<A>>()...};
    std::apply(
        [&](auto&... a) {
            emu::launch_named(name, kernel, c.grid, c.block, c.shared_bytes, c.cooperative, a...);
        },
        t);
}

struct Entry {
    const char* name;
    void (*run)(Call&);
};

// Qualified: argument-dependent lookup would also search the kernels' parameter namespaces.
#define EMU_KERNEL(K) {#K, [](Call& c) { emu_harness::invoke_kernel(#K, &K, c); }},
const Entry kKernels[] = {
#include EMU_REGISTER_FILE
    {nullptr, nullptr}};
#undef EMU_KERNEL

std::vector<unsigned char> slurp(const char* path) {
    FILE* f = std::fopen(path, "rb");
    if (!f) die("cannot open %s", path);
    std::vector<unsigned char> data;
    unsigned char chunk[1 << 16];
    for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;)
        data.insert(data.end(), chunk, chunk + n);
    std::fclose(f);
    return data;
}

}  // namespace emu_harness

int main(int argc, char** argv) {
    using namespace emu_harness;
    if (argc != 3) die("usage: %s CALL_FILE OUT_FILE", argv[0]);
    // Line by line: what a kernel printed reaches the pipe even when the run then aborts.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    Call call;
    call.file = slurp(argv[1]);
    parse(call);
    const Entry* e = kKernels;
    while (e->name && call.name != e->name) ++e;
    if (!e->name) die("no kernel %s in this build", call.name.c_str());
    e->run(call);
    FILE* out = std::fopen(argv[2], "wb");
    if (!out) die("cannot write %s", argv[2]);
    for (size_t b = 0; b < call.buffers.size(); ++b) {
        if (std::fwrite(call.buffers[b], 1, call.sizes[b], out) != call.sizes[b])
            die("cannot write %s", argv[2]);
        std::free(call.buffers[b]);
    }
    if (std::fclose(out) != 0) die("cannot write %s", argv[2]);
    return 0;
}
