// The link interface of an ELF shared object: what a static linker reads of a shared library
// it links against, digested without the code and data it never reads. A torch extension's
// link names libtorch_cpu.so and libtorch_cuda.so (~1 GB together, ~15 MB of interface): a
// new pod would read and hash the whole of them to check one cached link, longer than the
// link itself.
//
// What is digested: the ELF header, the program and section header tables (every section's
// offset, size and address: code that grows or moves shows), the section names, and the
// contents of every section but those a linker does not read from a shared object: code and
// data (SHT_PROGBITS, SHT_NOBITS), relocations (SHT_REL, SHT_RELA, SHT_RELR) and the static
// symbol table (SHT_SYMTAB and the string table it names). So the dynamic symbols and their
// names, versions (.gnu.version*), the dynamic section (SONAME, NEEDED, RUNPATH), the hash
// tables and the notes are all covered, and link-time warnings too (.gnu.warning* sections
// are read though they hold data). GNU ld, gold and lld take a shared object's symbols from
// its dynamic symbol table; its output names the library by SONAME and copies nothing of its
// code, so two libraries with the same interface give the same link.
//
// The notes include the build ID, which the toolchain computes over the whole library: a
// library rebuilt from other code has another digest even when its symbols are the same. What
// this digest buys is reading megabytes where the bytes are a gigabyte, not hits across
// rebuilt libraries.
#ifndef KCACHE_ENGINE_KEYS_ELF_LINK_INTERFACE_H_
#define KCACHE_ENGINE_KEYS_ELF_LINK_INTERFACE_H_

#include <cstdint>
#include <optional>
#include <string>

namespace kcache::objects {

// The link interface digest (XXH3-128, core/xxh128.h: 32 lowercase hex digits) of the file
// open at `fd`, `size` bytes long; nullopt when it is not a 64-bit little-endian ELF shared
// object (ET_DYN) whose headers are all inside the file, or cannot be read whole: then only its
// bytes identify it.
std::optional<std::string> ElfLinkInterfaceDigest(int fd, uint64_t size);

}  // namespace kcache::objects

#endif  // KCACHE_ENGINE_KEYS_ELF_LINK_INTERFACE_H_
