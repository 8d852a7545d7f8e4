// A setuptools extension (a C++ file; setuptools compiles with $CC and links with $CXX/$CC)
// built by `pip install --no-build-isolation` under `kcache run`, with the project's Python
// and the real gcc: the first build compiles, a second from a clean build directory hits.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testutil/kcache_run.h"
#include "tests/testutil/temp_dir.h"
#include "tests/testutil/tree_paths.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;
using testing::Contains;
using testing::Occurrences;
using testing::RunResult;

constexpr char kSetup[] = R"(from setuptools import Extension, setup
setup(name="kcache_probe", version="0.1",
      ext_modules=[Extension("kcache_probe", ["probe.cpp"], language="c++")])
)";

constexpr char kProbe[] = R"(#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject* Answer(PyObject*, PyObject*) { return PyLong_FromLong(42); }
static PyMethodDef kMethods[] = {{"answer", Answer, METH_NOARGS, nullptr},
                                 {nullptr, nullptr, 0, nullptr}};
static PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "kcache_probe", nullptr, -1, kMethods};
PyMODINIT_FUNC PyInit_kcache_probe() { return PyModule_Create(&kModule); }
)";

class SetupPyRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = testing::SourcePath("scripts/venv-python");
    if (testing::Run(python_ + " -c 'import setuptools, pip'").exit_code != 0) {
      GTEST_SKIP() << "the project's Python has no setuptools or pip";
    }
    tmp_.Write("pkg/setup.py", kSetup);
    tmp_.Write("pkg/probe.cpp", kProbe);
  }

  // Installs the package from a clean build directory into tmp/<site> and imports it.
  RunResult Install(const std::string& site) {
    std::string script =
        absl::StrCat("set -e\ncd ", tmp_ / "pkg", "\nrm -rf build *.egg-info\n", python_,
                     " -m pip install -v --no-build-isolation --no-deps --no-index --target ",
                     tmp_ / site, " . 2>&1\nPYTHONPATH=", tmp_ / site, " ", python_,
                     " -c 'import kcache_probe; print(\"answer\", kcache_probe.answer())'\n");
    return testing::RunUnderKcache(tmp_, site + "-run", script);
  }

  std::string python_;
  testing::TempDir tmp_;
};

TEST_F(SetupPyRunTest, SecondInstallFromACleanBuildHits) {
  RunResult first = Install("site1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(Contains(first.output, "answer 42")) << first.output;
  EXPECT_EQ(Occurrences(first.output, "kcache: miss probe.cpp"), 1) << first.output;
  RunResult second = Install("site2");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(Contains(second.output, "answer 42")) << second.output;
  EXPECT_EQ(Occurrences(second.output, "kcache: hit probe.cpp"), 1) << second.output;
  EXPECT_EQ(Occurrences(second.output, "kcache: miss"), 0) << second.output;
}

}  // namespace
}  // namespace kcache
