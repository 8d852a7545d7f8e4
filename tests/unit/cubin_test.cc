// Reading the SM out of a cubin's ELF header. Real NVRTC cubins for several SMs are checked
// in compiler_test; here: hand-made headers and files that are not cubins.
#include "core/cubin.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"

namespace kcache {
namespace {

// A 64-bit little-endian ELF header for EM_CUDA with `flags` in e_flags, as CUDA 13 writes it.
std::string CudaElfHeader(uint32_t flags, uint16_t machine = 190) {
  Elf64_Ehdr header{};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_ident[EI_DATA] = ELFDATA2LSB;
  header.e_ident[EI_VERSION] = EV_CURRENT;
  header.e_ident[EI_OSABI] = 0x41;  // CUDA
  header.e_ident[EI_ABIVERSION] = 8;
  header.e_type = ET_EXEC;
  header.e_machine = machine;
  header.e_version = EV_CURRENT;
  header.e_flags = flags;
  header.e_ehsize = sizeof(Elf64_Ehdr);
  return std::string(reinterpret_cast<const char*>(&header), sizeof header);
}

TEST(CubinTest, ReadsTheSmFromEflagsBits8To15) {
  // Values NVRTC 13.0 writes (see compiler_test): the SM in bits 8..15, other bits set too.
  EXPECT_EQ(*CubinSmArch(CudaElfHeader(0x4b00)), 75);
  EXPECT_EQ(*CubinSmArch(CudaElfHeader(0x5905)), 89);
  EXPECT_EQ(*CubinSmArch(CudaElfHeader(0x5a00)), 90);
  EXPECT_EQ(*CubinSmArch(CudaElfHeader(0x7800)), 120);
  EXPECT_EQ(*CubinSmArch(CudaElfHeader(0x79ff)), 121);
  EXPECT_EQ(*CubinSmArch(CudaElfHeader(0xffff5600)), 86);
  // A header followed by section data reads the same.
  EXPECT_EQ(*CubinSmArch(CudaElfHeader(0x5600) + std::string(4096, '\x7f')), 86);
}

TEST(CubinTest, ShortInputIsRejected) {
  for (size_t size : {0, 4, 63}) {
    std::string bytes = CudaElfHeader(0x5a00).substr(0, size);
    absl::StatusOr<int> sm = CubinSmArch(bytes);
    ASSERT_FALSE(sm.ok()) << size;
    EXPECT_EQ(sm.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(sm.status().message().find("shorter than a 64-bit ELF header"),
              absl::string_view::npos)
        << sm.status();
  }
}

TEST(CubinTest, GarbageIsRejected) {
  std::string garbage(256, 'x');
  absl::StatusOr<int> sm = CubinSmArch(garbage);
  ASSERT_FALSE(sm.ok());
  EXPECT_EQ(sm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sm.status().message().find("no ELF magic"), absl::string_view::npos) << sm.status();
  // PTX text is not a cubin either.
  EXPECT_FALSE(CubinSmArch(std::string(".version 9.0\n.target sm_90\n") + garbage).ok());
}

TEST(CubinTest, HostElfIsRejectedNamingTheMachine) {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  std::string self((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(self.size(), sizeof(Elf64_Ehdr));
  absl::StatusOr<int> sm = CubinSmArch(self);
  ASSERT_FALSE(sm.ok());
  EXPECT_EQ(sm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sm.status().message().find("not EM_CUDA (190)"), absl::string_view::npos)
      << sm.status();
  EXPECT_FALSE(CubinSmArch(CudaElfHeader(0x5a00, /*machine=*/EM_X86_64)).ok());
}

TEST(CubinTest, ThirtyTwoBitAndBigEndianElfAreRejected) {
  std::string elf32 = CudaElfHeader(0x5a00);
  elf32[EI_CLASS] = ELFCLASS32;
  EXPECT_NE(CubinSmArch(elf32).status().message().find("64-bit"), absl::string_view::npos);
  std::string big_endian = CudaElfHeader(0x5a00);
  big_endian[EI_DATA] = ELFDATA2MSB;
  EXPECT_NE(CubinSmArch(big_endian).status().message().find("little-endian"),
            absl::string_view::npos);
}

TEST(CubinTest, CudaElfWithoutAnSmInBits8To15IsRejected) {
  // An older layout (SM in the low byte, as CUDA 12 and earlier wrote it) is not misread.
  absl::StatusOr<int> sm = CubinSmArch(CudaElfHeader(0x0059));
  ASSERT_FALSE(sm.ok());
  EXPECT_EQ(sm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sm.status().message().find("holds no SM"), absl::string_view::npos) << sm.status();
}

}  // namespace
}  // namespace kcache
