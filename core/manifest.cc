#include "core/manifest.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/compile_options.h"
#include "core/target.h"

namespace kcache {
namespace {

namespace fs = std::filesystem;

// Builds errors that point at a place in the manifest.
class Where {
 public:
  Where(const std::string& path, const YAML::Node& node, std::string field)
      : path_(path), mark_(MarkOf(node)), field_(std::move(field)) {}

  absl::Status Error(absl::string_view what) const {
    std::string place =
        mark_.is_null() ? path_ : absl::StrCat(path_, ":", mark_.line + 1, ":", mark_.column + 1);
    return absl::InvalidArgumentError(absl::StrCat(place, ": ", field_, ": ", what));
  }
  // A field below this one; a field that is absent points at its parent.
  Where Child(const YAML::Node& node, absl::string_view suffix) const {
    Where child(path_, node, absl::StrCat(field_, suffix));
    if (child.mark_.is_null()) child.mark_ = mark_;
    return child;
  }

 private:
  static YAML::Mark MarkOf(const YAML::Node& node) {
    return node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  }

  std::string path_;
  YAML::Mark mark_;
  std::string field_;
};

absl::Status CheckKeys(const YAML::Node& map, const Where& where,
                       const std::set<std::string>& allowed) {
  if (!map.IsMap()) return where.Error("must be a mapping of field: value");
  for (const auto& item : map) {
    if (!item.first.IsScalar()) {
      return where.Child(item.first, "").Error("a field name must be a single word");
    }
    std::string key = item.first.as<std::string>();
    if (!allowed.count(key)) {
      return where.Child(item.first, absl::StrCat(".", key))
          .Error(absl::StrCat("unknown field; allowed fields: ", absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ScalarString(const YAML::Node& node, const Where& where) {
  if (!node.IsScalar()) return where.Error("must be a single value (a string)");
  return node.as<std::string>();
}

// `source_text` and `header_texts` values: text, or base64 tagged !!binary (WriteManifest
// writes that for text that is not UTF-8, which a YAML string cannot carry exactly).
absl::StatusOr<std::string> TextValue(const YAML::Node& node, const Where& where) {
  if (node.IsScalar() && node.Tag() == "tag:yaml.org,2002:binary") {
    YAML::Binary binary;
    if (!YAML::convert<YAML::Binary>::decode(node, binary)) {
      return where.Error("is tagged !!binary but is not base64");
    }
    return std::string(reinterpret_cast<const char*>(binary.data()), binary.size());
  }
  return ScalarString(node, where);
}

absl::StatusOr<std::vector<std::string>> StringList(const YAML::Node& node, const Where& where) {
  std::vector<std::string> out;
  if (!node) return out;
  if (!node.IsSequence()) return where.Error("must be a list, e.g. [a, b]");
  for (size_t i = 0; i < node.size(); ++i) {
    absl::StatusOr<std::string> s =
        ScalarString(node[i], where.Child(node[i], absl::StrCat("[", i, "]")));
    if (!s.ok()) return s.status();
    out.push_back(*std::move(s));
  }
  return out;
}

absl::StatusOr<std::string> ReadFile(const fs::path& file, const Where& where) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return where.Error(absl::StrCat("cannot read '", file.string(),
                                    "'; paths are relative to the manifest's folder"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Lowercase letters, digits, '_' and inner '.' (variants are named "<entry>.<variant>", and
// an exported manifest lists them as entries of their own).
bool IsValidName(absl::string_view name) {
  if (name.empty() || name.front() == '.' || name.back() == '.') return false;
  for (char c : name) {
    if (!absl::ascii_islower(static_cast<unsigned char>(c)) &&
        !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

// A valid, unique manifest name for a kernel whatever a worker called it.
std::string ManifestNameFor(absl::string_view name, std::set<std::string>& taken) {
  std::string out;
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    out += absl::ascii_isalnum(u) || c == '_' || c == '.' ? absl::ascii_tolower(u) : '_';
  }
  while (!out.empty() && out.front() == '.') out.erase(out.begin());
  while (!out.empty() && out.back() == '.') out.pop_back();
  if (out.empty()) out = "kernel";
  std::string unique = out;
  for (int n = 2; !taken.insert(unique).second; ++n) unique = absl::StrCat(out, "_", n);
  return unique;
}

absl::StatusOr<int> ArchField(const YAML::Node& node, const Where& where) {
  if (!node) return 0;
  absl::StatusOr<std::string> text = ScalarString(node, where);
  if (!text.ok()) return text.status();
  absl::StatusOr<Sm> sm = ParseSm(*text);
  if (!sm.ok()) {
    return where.Error(
        absl::StrCat("'", *text, "' is not an architecture; write it as major.minor, e.g. 8.0"));
  }
  return sm->arch();
}

absl::Status CheckOptions(const std::vector<std::string>& options, const Where& where) {
  absl::Status status = ValidateCompileOptions(options);
  if (!status.ok()) return where.Error(status.message());
  return absl::OkStatus();
}

// `source: file` (relative to the manifest) or `source_text: |` (inline), exactly one.
absl::Status ParseSource(const YAML::Node& entry, const Where& where, const fs::path& base,
                         ManifestKernel* kernel) {
  const std::string& name = kernel->record.spec.name;
  if (entry["source"] && entry["source_text"]) {
    return where.Error(
        absl::StrCat("kernel '", name, "' has both 'source' and 'source_text'; keep one"));
  }
  if (entry["source_text"]) {
    absl::StatusOr<std::string> text =
        TextValue(entry["source_text"], where.Child(entry["source_text"], ".source_text"));
    if (!text.ok()) return text.status();
    kernel->record.spec.source = *std::move(text);
    kernel->source_path = absl::StrCat("(inline source of ", name, ")");
    return absl::OkStatus();
  }
  if (!entry["source"]) {
    return where.Error(absl::StrCat("kernel '", name, "' is missing field 'source'"));
  }
  Where source_where = where.Child(entry["source"], ".source");
  absl::StatusOr<std::string> source = ScalarString(entry["source"], source_where);
  if (!source.ok()) return source.status();
  kernel->source_path = (base / *source).lexically_normal().string();
  kernel->record.spec.source_name = *source;
  absl::StatusOr<std::string> text = ReadFile(kernel->source_path, source_where);
  if (!text.ok()) return text.status();
  kernel->record.spec.source = *std::move(text);
  return absl::OkStatus();
}

// `headers: [files]` (relative to the manifest) and/or `header_texts: {name: content}`.
absl::Status ParseHeaders(const YAML::Node& entry, const Where& where, const fs::path& base,
                          KernelSpec* spec) {
  Where headers_where = where.Child(entry["headers"], ".headers");
  absl::StatusOr<std::vector<std::string>> headers = StringList(entry["headers"], headers_where);
  if (!headers.ok()) return headers.status();
  for (const std::string& header : *headers) {
    absl::StatusOr<std::string> content = ReadFile(base / header, headers_where);
    if (!content.ok()) return content.status();
    spec->headers[header] = *std::move(content);
  }
  const YAML::Node& texts = entry["header_texts"];
  if (!texts) return absl::OkStatus();
  Where texts_where = where.Child(texts, ".header_texts");
  if (!texts.IsMap()) return texts_where.Error("must be a mapping of header name: content");
  for (const auto& item : texts) {
    if (!item.first.IsScalar()) {
      return texts_where.Child(item.first, "").Error("a header name must be a single value");
    }
    std::string header = item.first.as<std::string>();
    Where item_where = texts_where.Child(item.second, absl::StrCat(".", header));
    absl::StatusOr<std::string> content = TextValue(item.second, item_where);
    if (!content.ok()) return content.status();
    if (!spec->headers.emplace(header, *std::move(content)).second) {
      return item_where.Error("is given twice (in headers and header_texts); keep one");
    }
  }
  return absl::OkStatus();
}

// Parses one entry of `kernels:` into one kernel plus one per variant.
absl::Status ParseEntry(const YAML::Node& entry, const Where& where, const fs::path& base,
                        std::vector<ManifestKernel>* out) {
  static const std::set<std::string> kFields = {
      "name",    "source",           "source_text", "headers",  "header_texts",
      "options", "name_expressions", "min_arch",    "max_arch", "cost",
      "ltoir",   "variants"};
  if (absl::Status s = CheckKeys(entry, where, kFields); !s.ok()) return s;

  ManifestKernel kernel;
  KernelSpec& spec = kernel.record.spec;
  if (!entry["name"]) return where.Error("missing field 'name'");
  absl::StatusOr<std::string> name =
      ScalarString(entry["name"], where.Child(entry["name"], ".name"));
  if (!name.ok()) return name.status();
  if (!IsValidName(*name)) {
    return where.Child(entry["name"], ".name")
        .Error(absl::StrCat("'", *name,
                            "' is not a valid name; use lowercase letters, digits, _ and ."));
  }
  spec.name = *name;

  if (absl::Status s = ParseSource(entry, where, base, &kernel); !s.ok()) return s;
  if (absl::Status s = ParseHeaders(entry, where, base, &spec); !s.ok()) return s;

  Where options_where = where.Child(entry["options"], ".options");
  absl::StatusOr<std::vector<std::string>> options = StringList(entry["options"], options_where);
  if (!options.ok()) return options.status();
  if (absl::Status s = CheckOptions(*options, options_where); !s.ok()) return s;
  spec.options = *std::move(options);

  absl::StatusOr<std::vector<std::string>> expressions = StringList(
      entry["name_expressions"], where.Child(entry["name_expressions"], ".name_expressions"));
  if (!expressions.ok()) return expressions.status();
  spec.name_expressions = *std::move(expressions);

  absl::StatusOr<int> min_arch =
      ArchField(entry["min_arch"], where.Child(entry["min_arch"], ".min_arch"));
  if (!min_arch.ok()) return min_arch.status();
  absl::StatusOr<int> max_arch =
      ArchField(entry["max_arch"], where.Child(entry["max_arch"], ".max_arch"));
  if (!max_arch.ok()) return max_arch.status();
  if (*min_arch && *max_arch && *min_arch > *max_arch) {
    return where.Child(entry["max_arch"], ".max_arch").Error("is below min_arch");
  }
  kernel.record.arch = ArchRange{*min_arch, *max_arch};

  try {
    if (entry["cost"]) kernel.cost_ms = entry["cost"].as<int>();
  } catch (const YAML::Exception&) {
    return where.Child(entry["cost"], ".cost").Error("must be a whole number of milliseconds");
  }
  try {
    if (entry["ltoir"]) kernel.record.want_ltoir = entry["ltoir"].as<bool>();
  } catch (const YAML::Exception&) {
    return where.Child(entry["ltoir"], ".ltoir").Error("must be true or false");
  }

  // The limits every spec keeps (the daemon refuses more), checked here so that a manifest the
  // image build warms is one the daemon would accept from a worker.
  if (absl::Status s = ValidateSpecLimits(spec, "the kernel"); !s.ok()) {
    return where.Error(s.message());
  }
  ManifestKernel base_kernel = kernel;
  base_kernel.record.id = ComputeKernelId(base_kernel.record.spec);
  out->push_back(base_kernel);

  const YAML::Node& variants = entry["variants"];
  if (!variants) return absl::OkStatus();
  Where variants_where = where.Child(variants, ".variants");
  if (!variants.IsSequence()) return variants_where.Error("must be a list of {name, options}");
  for (size_t i = 0; i < variants.size(); ++i) {
    const YAML::Node& v = variants[i];
    Where vw = variants_where.Child(v, absl::StrCat("[", i, "]"));
    if (absl::Status s = CheckKeys(v, vw, {"name", "options"}); !s.ok()) return s;
    if (!v["name"]) return vw.Error("missing field 'name'");
    absl::StatusOr<std::string> vname = ScalarString(v["name"], vw.Child(v["name"], ".name"));
    if (!vname.ok()) return vname.status();
    if (!IsValidName(*vname)) {
      return vw.Child(v["name"], ".name")
          .Error(absl::StrCat("'", *vname,
                              "' is not a valid name; use lowercase letters, digits and _"));
    }
    Where vo = vw.Child(v["options"], ".options");
    absl::StatusOr<std::vector<std::string>> vopts = StringList(v["options"], vo);
    if (!vopts.ok()) return vopts.status();
    if (absl::Status s = CheckOptions(*vopts, vo); !s.ok()) return s;
    ManifestKernel variant = kernel;
    variant.record.spec.name = absl::StrCat(spec.name, ".", *vname);
    variant.record.spec.options.insert(variant.record.spec.options.end(), vopts->begin(),
                                       vopts->end());
    variant.record.id = ComputeKernelId(variant.record.spec);
    out->push_back(std::move(variant));
  }
  return absl::OkStatus();
}

}  // namespace

const ManifestKernel* Manifest::Find(absl::string_view name) const {
  for (const ManifestKernel& k : kernels) {
    if (k.record.spec.name == name) return &k;
  }
  return nullptr;
}

namespace {

absl::StatusOr<Manifest> ParseDocument(const YAML::Node& root, const std::string& path) {
  Where top(path, root, "manifest");
  if (absl::Status s = CheckKeys(root, top, {"version", "kernels"}); !s.ok()) return s;
  int version = 0;
  try {
    version = root["version"] ? root["version"].as<int>() : 0;
  } catch (const YAML::Exception&) {
  }
  if (version != kManifestVersion) {
    return top.Child(root["version"], ".version")
        .Error(absl::StrCat("must be ", kManifestVersion, " (this kcache reads manifest version ",
                            kManifestVersion, ")"));
  }
  const YAML::Node& kernels = root["kernels"];
  Where kw = top.Child(kernels, ".kernels");
  if (!kernels || !kernels.IsSequence() || kernels.size() == 0) {
    return kw.Error("must be a non-empty list of kernels");
  }

  Manifest manifest;
  manifest.path = path;
  fs::path base = fs::path(path).parent_path();
  std::set<std::string> names;
  for (size_t i = 0; i < kernels.size(); ++i) {
    Where ew = Where(path, kernels[i], absl::StrCat("kernels[", i, "]"));
    size_t first_new = manifest.kernels.size();
    if (absl::Status s = ParseEntry(kernels[i], ew, base, &manifest.kernels); !s.ok()) return s;
    for (size_t k = first_new; k < manifest.kernels.size(); ++k) {
      const std::string& name = manifest.kernels[k].record.spec.name;
      if (!names.insert(name).second) {
        return ew.Child(kernels[i]["name"], ".name")
            .Error(absl::StrCat("kernel name '", name, "' is used twice; names must be unique"));
      }
    }
  }
  return manifest;
}

}  // namespace

absl::StatusOr<Manifest> ParseManifest(absl::string_view yaml, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", e.mark.line + 1, ":",
                                                   e.mark.column + 1, ": not valid YAML: ", e.msg));
  }
  try {
    return ParseDocument(root, path);
  } catch (const YAML::Exception& e) {
    // A node of a shape the checks did not foresee (yaml-cpp throws when it cannot convert one):
    // an error like the others, never an exception out of the parser.
    std::string place =
        e.mark.is_null() ? path : absl::StrCat(path, ":", e.mark.line + 1, ":", e.mark.column + 1);
    return absl::InvalidArgumentError(absl::StrCat(place, ": not a valid manifest: ", e.msg));
  }
}

namespace {

// Kernel ids hash the exact bytes, so text must come back from YAML unchanged: a literal
// block (readable) when that is certain, a double-quoted string (every byte escaped) otherwise.
bool LiteralBlockKeepsExactly(absl::string_view text) {
  if (text.empty() || text.back() != '\n' || absl::EndsWith(text, "\n\n")) return false;
  if (text.front() == ' ' || text.front() == '\n' || text.front() == '\t') return false;
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '\r' || (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) return false;
  }
  return true;
}

void EmitText(YAML::Emitter& out, const std::string& text) {
  if (Utf8ValidPrefix(text) != text.size()) {  // YAML strings are Unicode: bytes go as base64
    out << YAML::Binary(reinterpret_cast<const unsigned char*>(text.data()), text.size());
    return;
  }
  out << (LiteralBlockKeepsExactly(text) ? YAML::Literal : YAML::DoubleQuoted) << text;
}

}  // namespace

Manifest ManifestFromRecords(std::vector<KernelRecord> records) {
  Manifest manifest;
  manifest.path = "(kernels sent over the wire)";
  for (KernelRecord& record : records) {
    ManifestKernel kernel;
    kernel.source_path = absl::StrCat("(inline source of ", record.spec.name, ")");
    kernel.record = std::move(record);
    manifest.kernels.push_back(std::move(kernel));
  }
  return manifest;
}

std::string WriteManifest(const std::vector<KernelRecord>& records, absl::string_view comment) {
  YAML::Emitter out;
  if (!comment.empty()) {
    for (absl::string_view line : absl::StrSplit(comment, '\n')) {
      out << YAML::Comment(std::string(line));
      out << YAML::Newline;
    }
  }
  out << YAML::BeginMap << YAML::Key << "version" << YAML::Value << kManifestVersion;
  out << YAML::Key << "kernels" << YAML::Value << YAML::BeginSeq;
  std::set<std::string> names;
  for (const KernelRecord& r : records) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << ManifestNameFor(r.spec.name, names);
    out << YAML::Key << "source_text" << YAML::Value;
    EmitText(out, r.spec.source);
    if (!r.spec.headers.empty()) {
      out << YAML::Key << "header_texts" << YAML::Value << YAML::BeginMap;
      for (const auto& [name, content] : r.spec.headers) {
        out << YAML::Key << name << YAML::Value;
        EmitText(out, content);
      }
      out << YAML::EndMap;
    }
    if (!r.spec.options.empty()) {
      out << YAML::Key << "options" << YAML::Value << YAML::Flow << r.spec.options;
    }
    if (!r.spec.name_expressions.empty()) {
      out << YAML::Key << "name_expressions" << YAML::Value << YAML::Flow
          << r.spec.name_expressions;
    }
    if (r.arch.min_arch) {
      out << YAML::Key << "min_arch" << YAML::Value << SmFromArch(r.arch.min_arch).ToString();
    }
    if (r.arch.max_arch) {
      out << YAML::Key << "max_arch" << YAML::Value << SmFromArch(r.arch.max_arch).ToString();
    }
    if (r.want_ltoir) out << YAML::Key << "ltoir" << YAML::Value << true;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

absl::StatusOr<Manifest> LoadManifest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read manifest '", path, "': no such file or not readable"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseManifest(text.str(), path);
}

}  // namespace kcache
