// A shared object's link interface digest (DigestKind::kLinkInput), on libraries the real c++
// builds here: what must change it (an exported symbol, the SONAME, a version), what must not
// (code of the same layout), and what is digested by its bytes instead.
#include "engine/keys/elf_link_interface.h"

#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/xxh128.h"
#include "engine/keys/file_digests.h"
#include "tests/testutil/run.h"
#include "tests/testutil/temp_dir.h"

namespace kcache::objects {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Builds `name` from `source` with c++ `flags`; returns its path.
std::string Build(const TempDir& tmp, const std::string& name, const std::string& source,
                  const std::string& flags = "-shared -fPIC") {
  std::string src = tmp.Write(absl::StrCat("src/", name, ".cpp"), source);
  std::string out = tmp / name;
  testing::RunResult built = testing::Run(absl::StrCat("c++ ", flags, " ", src, " -o ", out));
  EXPECT_EQ(built.exit_code, 0) << built.output;
  return out;
}

std::optional<std::string> InterfaceOf(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  std::optional<std::string> digest =
      ElfLinkInterfaceDigest(fd, static_cast<uint64_t>(fs::file_size(path)));
  close(fd);
  return digest;
}

// The offset and size of the section named `name` in the ELF file `bytes`.
std::pair<size_t, size_t> SectionOf(const std::string& bytes, const std::string& name) {
  Elf64_Ehdr header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  auto section = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, bytes.data() + header.e_shoff + i * sizeof(Elf64_Shdr), sizeof(s));
    return s;
  };
  Elf64_Shdr names = section(header.e_shstrndx);
  for (size_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr s = section(i);
    if (bytes.c_str() + names.sh_offset + s.sh_name == name) return {s.sh_offset, s.sh_size};
  }
  ADD_FAILURE() << "no section " << name;
  return {0, 0};
}

constexpr char kLibrary[] = "int dep(int x) { return x * 3 + 1; }\nint other() { return 7; }\n";

TEST(ElfLinkInterfaceTest, CodeOfTheSameLayoutDoesNotChangeItAndDoesChangeTheBytes) {
  TempDir tmp;
  std::string lib = Build(tmp, "libdep.so", kLibrary);
  std::string bytes = ReadBytes(lib);
  auto [text, text_size] = SectionOf(bytes, ".text");
  ASSERT_GT(text_size, 0u);
  std::string patched = bytes;
  for (size_t i = 0; i < text_size; ++i) patched[text + i] = '\xcc';  // int3: another body
  std::string copy = tmp / "libpatched.so";
  WriteBytes(copy, patched);
  ASSERT_TRUE(InterfaceOf(lib).has_value());
  EXPECT_EQ(InterfaceOf(lib), InterfaceOf(copy));
  EXPECT_NE(Xxh128Hex(bytes), Xxh128Hex(patched));
}

TEST(ElfLinkInterfaceTest, EachPartOfTheInterfaceChangesIt) {
  TempDir tmp;
  std::optional<std::string> base = InterfaceOf(Build(tmp, "base.so", kLibrary));
  ASSERT_TRUE(base.has_value());
  const std::pair<std::string, std::string> kChanges[] = {
      // An exported symbol more; one renamed; one's type (a function becomes an object).
      {"added", absl::StrCat(kLibrary, "int more() { return 2; }\n")},
      {"renamed", "int dep(int x) { return x * 3 + 1; }\nint other2() { return 7; }\n"},
      {"object", "int dep(int x) { return x * 3 + 1; }\nint other = 7;\n"},
      // Hidden: the symbol leaves the dynamic table.
      {"hidden",
       "int dep(int x) { return x * 3 + 1; }\n"
       "__attribute__((visibility(\"hidden\"))) int other() { return 7; }\n"},
  };
  for (const auto& [name, source] : kChanges) {
    std::optional<std::string> changed = InterfaceOf(Build(tmp, name + ".so", source));
    ASSERT_TRUE(changed.has_value()) << name;
    EXPECT_NE(changed, base) << name;
  }
  // The SONAME a link records; a symbol version.
  std::optional<std::string> soname =
      InterfaceOf(Build(tmp, "soname.so", kLibrary, "-shared -fPIC -Wl,-soname,libdep.so.2"));
  EXPECT_NE(soname, base);
  std::string script = tmp.Write("v.map", "DEP_2 { global: dep; other; local: *; };\n");
  std::optional<std::string> versioned = InterfaceOf(Build(
      tmp, "versioned.so", kLibrary, absl::StrCat("-shared -fPIC -Wl,--version-script=", script)));
  EXPECT_NE(versioned, base);
  // Rebuilt unchanged: the same (the build is reproducible here).
  EXPECT_EQ(InterfaceOf(Build(tmp, "base.so", kLibrary)), base);
}

TEST(ElfLinkInterfaceTest, WhatIsNotASharedObjectIsLeftToItsBytes) {
  TempDir tmp;
  EXPECT_FALSE(InterfaceOf(Build(tmp, "dep.o", kLibrary, "-c -fPIC")).has_value());
  EXPECT_FALSE(InterfaceOf(Build(tmp, "app", "int main() { return 0; }\n", "-no-pie")).has_value());
  std::string script = tmp.Write("libc.so", "GROUP ( /lib/x86_64-linux-gnu/libc.so.6 )\n");
  EXPECT_FALSE(InterfaceOf(script).has_value());
  // Headers that point past the end of the file (a truncated library).
  std::string bytes = ReadBytes(Build(tmp, "whole.so", kLibrary));
  std::string truncated = tmp / "truncated.so";
  WriteBytes(truncated, bytes.substr(0, bytes.size() / 2));
  EXPECT_FALSE(InterfaceOf(truncated).has_value());
}

TEST(ElfLinkInterfaceTest, FileDigestsSpellAndMemoizeEachKindApart) {
  TempDir tmp;
  std::string lib = Build(tmp, "libdep.so", kLibrary);
  std::string script = tmp.Write("libscript.so", "GROUP ( libdep.so )\n");
  std::string memo = tmp / "memo";
  std::string content, link;
  {
    FileDigests digests(memo, /*settle=*/absl::ZeroDuration());
    content = digests.Digest(lib).value().hex;
    link = digests.Digest(lib, DigestKind::kLinkInput).value().hex;
    EXPECT_EQ(content, Xxh128Hex(ReadBytes(lib)));
    EXPECT_EQ(link, absl::StrCat(kLinkInputPrefix, *InterfaceOf(lib)));
    // Not a shared object: its bytes, spelled as a link input.
    EXPECT_EQ(digests.Digest(script, DigestKind::kLinkInput).value().hex,
              absl::StrCat(kLinkInputPrefix, Xxh128Hex(ReadBytes(script))));
    digests.Save();
  }
  FileDigests again(memo);
  EXPECT_EQ(again.Digest(lib).value().hex, content);
  EXPECT_EQ(again.Digest(lib, DigestKind::kLinkInput).value().hex, link);
  // A manifest's check takes the kind from the recorded spelling.
  EXPECT_EQ(again.FirstMismatch({{lib, link}, {lib, content}}), 2u);
  EXPECT_EQ(again.FirstMismatch({{lib, content}, {lib, absl::StrCat(kLinkInputPrefix, content)}}),
            1u);
}

}  // namespace
}  // namespace kcache::objects
