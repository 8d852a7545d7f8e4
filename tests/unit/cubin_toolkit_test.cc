// Reading the toolkit that built a cubin (core/cubin.h CubinToolkit) out of real cubins from
// NVRTC 13 (the CUDA toolkit; a .note.nv.cuinfo note and EIATTR_CUDA_API_VERSION) and from the
// NVRTC 12.9 wheel (the attribute only), and out of those cubins damaged: every truncation, notes
// and attributes whose sizes lie, two toolkits named, none named, sections that overlap.
#include <elf.h>

#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "core/artifact.h"
#include "core/cubin.h"
#include "core/load_check.h"
#include "gtest/gtest.h"
#include "tests/testutil/kernels.h"
#include "tests/testutil/toolkit.h"

namespace kcache {
namespace {

using ::kcache::testing::CompileCubin;

constexpr char kCuinfoOwner[] = "NVIDIA Corp";
constexpr char kApiVersionRecord[] = "\x04\x37\x04\x00";  // EIFMT_SVAL, EIATTR 0x37, 4 bytes

std::string Cubin(std::shared_ptr<const Toolkit> toolkit) {
  absl::StatusOr<std::string> cubin =
      CompileCubin(std::move(toolkit), "saxpy", ::kcache::testing::kSaxpySource, "sm_90");
  EXPECT_TRUE(cubin.ok()) << cubin.status();
  return cubin.value_or("");
}

std::shared_ptr<const Toolkit> Load(const std::string& root) {
  absl::StatusOr<std::shared_ptr<const Toolkit>> toolkit = Toolkit::Load(root);
  EXPECT_TRUE(toolkit.ok()) << root << ": " << toolkit.status();
  return toolkit.value_or(nullptr);
}

// The offset of the cuinfo note's header (namesz) in `cubin`: 12 bytes before its owner's name.
size_t CuinfoNote(const std::string& cubin) {
  size_t owner = cubin.find(std::string(kCuinfoOwner, sizeof kCuinfoOwner));
  while (owner != std::string::npos && owner >= 12) {
    uint32_t type;
    std::memcpy(&type, cubin.data() + owner - 4, sizeof type);
    if (type == 0x3e8) return owner - 12;
    owner = cubin.find(std::string(kCuinfoOwner, sizeof kCuinfoOwner), owner + 1);
  }
  return std::string::npos;
}

void Put32(std::string& bytes, size_t at, uint32_t value) {
  std::memcpy(bytes.data() + at, &value, sizeof value);
}

void ExpectUnreadable(const std::string& bytes, absl::string_view why) {
  absl::StatusOr<CubinToolkitVersion> toolkit = CubinToolkit(bytes);
  ASSERT_FALSE(toolkit.ok()) << toolkit->major << "." << toolkit->minor;
  EXPECT_EQ(toolkit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(toolkit.status().message(), why)) << toolkit.status();
}

class CubinToolkitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<std::shared_ptr<const Toolkit>>& toolkit =
        ::kcache::testing::SharedToolkit();
    ASSERT_TRUE(toolkit.ok()) << toolkit.status();
    toolkit_ = *toolkit;
    cubin_ = Cubin(toolkit_);
    ASSERT_FALSE(cubin_.empty());
  }

  std::shared_ptr<const Toolkit> toolkit_;
  std::string cubin_;  // saxpy for sm_90 by the CUDA toolkit's NVRTC (13.x)
};

TEST_F(CubinToolkitTest, ReadsTheToolkitOfANvrtc13Cubin) {
  ASSERT_NE(CuinfoNote(cubin_), std::string::npos) << "CUDA 13 cubins carry .note.nv.cuinfo";
  absl::StatusOr<CubinToolkitVersion> read = CubinToolkit(cubin_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->major, toolkit_->identity().major);
  EXPECT_EQ(read->minor, toolkit_->identity().minor);
  EXPECT_TRUE(IsCudaElf(cubin_));
  EXPECT_EQ(MinDriverFor(ArtifactKind::kCubin, read->major, read->minor),
            static_cast<uint32_t>(toolkit_->identity().major) * 1000);
}

// saxpy for sm_90 by the NVRTC 12.9 wheel, compiled once.
const std::string& Cubin129() {
  static const std::string* cubin = [] {
    std::string root = ::kcache::testing::Nvrtc129Root();
    EXPECT_FALSE(root.empty()) << "no NVRTC 12.9 wheel in .venv: run scripts/install-deps.sh";
    return new std::string(root.empty() ? "" : Cubin(Load(root)));
  }();
  return *cubin;
}

TEST_F(CubinToolkitTest, ReadsTheToolkitOfANvrtc129CubinWhichHasNoNote) {
  const std::string& cubin = Cubin129();
  ASSERT_FALSE(cubin.empty());
  EXPECT_EQ(CuinfoNote(cubin), std::string::npos) << "12.x wrote a note: read it too";
  absl::StatusOr<CubinToolkitVersion> read = CubinToolkit(cubin);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->major, 12);
  EXPECT_EQ(read->minor, 9);
  EXPECT_TRUE(IsCudaElf(cubin));
}

TEST_F(CubinToolkitTest, ADriverLoadsACubinOfItsMajorOrOlder) {
  ASSERT_EQ(toolkit_->identity().major, 13) << "the CUDA toolkit here is not 13.x";
  const std::string& cubin129 = Cubin129();
  ASSERT_FALSE(cubin129.empty());
  absl::Status too_old = CheckCubinForDriver(cubin_, 12090);
  EXPECT_EQ(too_old.code(), absl::StatusCode::kFailedPrecondition) << too_old;
  EXPECT_TRUE(
      absl::StrContains(too_old.message(), "needs driver 13.0 or newer; the driver is 12.9"))
      << too_old;
  EXPECT_TRUE(CheckCubinForDriver(cubin129, 12090).ok());
  EXPECT_TRUE(CheckCubinForDriver(cubin129, 12000).ok());
  EXPECT_EQ(CheckCubinForDriver(cubin129, 11080).code(), absl::StatusCode::kFailedPrecondition);
  for (uint32_t driver : {13000u, 13020u, 14000u, 0u}) {  // 0: unknown, not checked
    EXPECT_TRUE(CheckCubinForDriver(cubin_, driver).ok()) << driver;
    EXPECT_TRUE(CheckCubinForDriver(cubin129, driver).ok()) << driver;
  }
  EXPECT_TRUE(CheckCubinForDriver("a pickled Inductor entry", 12090).ok()) << "not a cubin";
  EXPECT_TRUE(CheckCubinForDriver(".version 9.0\n.target sm_90\n", 12090).ok()) << "PTX";
  std::string unreadable = cubin_.substr(0, 64);  // the header alone
  EXPECT_EQ(CheckCubinForDriver(unreadable, 13000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckCubinForDriver(unreadable, 0).ok());
}

TEST_F(CubinToolkitTest, NotACubinIsRefused) {
  ExpectUnreadable("", "not a CUDA cubin");
  ExpectUnreadable(std::string(4096, 'x'), "no ELF magic");
  ExpectUnreadable(".version 9.0\n.target sm_90\n", "not a CUDA cubin");
  std::string host = cubin_;
  host[18] = static_cast<char>(EM_X86_64);
  host[19] = 0;
  ExpectUnreadable(host, "not EM_CUDA");
  EXPECT_FALSE(IsCudaElf(host));
  EXPECT_FALSE(
      IsCudaElf("\x7f"
                "EL"));
  EXPECT_FALSE(IsCudaElf("pickled inductor entry"));
}

TEST_F(CubinToolkitTest, EveryTruncationIsReadOrRefusedWithoutReadingPastTheEnd) {
  // Every cut either still names the right toolkit or is refused: never another toolkit.
  for (size_t size = 0; size < cubin_.size(); ++size) {
    std::string cut = cubin_.substr(0, size);  // exactly `size` bytes: ASan sees a read past
    absl::StatusOr<CubinToolkitVersion> read = CubinToolkit(cut);
    if (read.ok()) {
      EXPECT_EQ(read->major, toolkit_->identity().major) << size;
    } else {
      EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << size;
    }
  }
}

TEST_F(CubinToolkitTest, LyingNoteSizesAreNotReadPastTheSection) {
  size_t note = CuinfoNote(cubin_);
  ASSERT_NE(note, std::string::npos);
  for (uint32_t size : {0xffffffffu, 0xfffffffdu, 0x7fffffffu, 4096u}) {
    std::string name_lies = cubin_, desc_lies = cubin_;
    Put32(name_lies, note, size);
    Put32(desc_lies, note + 4, size);
    // The note is skipped; the attribute still names the toolkit.
    for (const std::string& damaged : {name_lies, desc_lies}) {
      absl::StatusOr<CubinToolkitVersion> read = CubinToolkit(damaged);
      ASSERT_TRUE(read.ok()) << size << ": " << read.status();
      EXPECT_EQ(read->major, toolkit_->identity().major);
    }
  }
}

TEST_F(CubinToolkitTest, LyingAttributeSizesAreNotReadPastTheSection) {
  size_t record = cubin_.find(std::string(kApiVersionRecord, 4));
  ASSERT_NE(record, std::string::npos);
  std::string damaged = cubin_;
  damaged[record + 2] = '\xff';
  damaged[record + 3] = '\xff';
  absl::StatusOr<CubinToolkitVersion> read = CubinToolkit(damaged);  // the note still names it
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->major, toolkit_->identity().major);
}

TEST_F(CubinToolkitTest, ACubinNamingTwoToolkitsOrNoneIsRefused) {
  size_t note = CuinfoNote(cubin_);
  size_t record = cubin_.find(std::string(kApiVersionRecord, 4));
  ASSERT_NE(note, std::string::npos);
  ASSERT_NE(record, std::string::npos);
  std::string two = cubin_;
  two[note + 12 + 12 + 4] = static_cast<char>(129);  // the note's toolkit (after name, 12 bytes)
  ExpectUnreadable(two, " and toolkit 1");

  std::string none = cubin_;
  Put32(none, note + 8, 0x3e9);  // another note type
  none[record + 1] = 0x38;       // another attribute
  ExpectUnreadable(none, "names no toolkit");
}

TEST_F(CubinToolkitTest, OverlappingSectionsAreRefusedNotReadAgainAndAgain) {
  // Every section header pointed at the whole file: read once, the scan would be
  // sections x file size; refused instead.
  std::string damaged = cubin_;
  Elf64_Ehdr header;
  std::memcpy(&header, damaged.data(), sizeof header);
  for (uint16_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr section;
    size_t at = header.e_shoff + size_t{i} * header.e_shentsize;
    std::memcpy(&section, damaged.data() + at, sizeof section);
    section.sh_type = SHT_NOTE;
    section.sh_offset = 0;
    section.sh_size = damaged.size();
    std::memcpy(damaged.data() + at, &section, sizeof section);
  }
  ExpectUnreadable(damaged, "sections overlap");
}

TEST_F(CubinToolkitTest, SectionHeadersOutsideTheFileAreRefused) {
  std::string damaged = cubin_;
  uint64_t far = uint64_t{1} << 40;
  std::memcpy(damaged.data() + offsetof(Elf64_Ehdr, e_shoff), &far, sizeof far);
  ExpectUnreadable(damaged, "lies outside the file");
}

}  // namespace
}  // namespace kcache
