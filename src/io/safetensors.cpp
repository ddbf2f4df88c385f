// Parses and checks a safetensors header. Every number in the header is outside input: it is
// range-checked before it is used as an offset, a size or a count.
#include "io/safetensors.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"

namespace pagoda {

namespace {

// ordered_json keeps the header's own tensor order, which tensors() promises.
using json = nlohmann::ordered_json;

// Real headers are a few MB at most; a larger length is corruption, not a reason to allocate.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Parses the header JSON, rejecting duplicate keys in any object: nlohmann keeps the last of a
// duplicate silently, and two definitions of one tensor leave it ambiguous which bytes are meant.
json parse_header_json(const uint8_t* begin, const uint8_t* end, const std::string& where) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  bool duplicate_is_tensor = false;
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second && duplicate.empty()) {
        duplicate = key;
        duplicate_is_tensor = open_objects.size() == 1;
      }
    }
    return true;
  };
  json header = json::parse(begin, end, callback, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    throw Error(where + ": the header is not valid JSON; the file is corrupt or not safetensors");
  }
  if (!header.is_object()) throw Error(where + ": the header is JSON but not an object");
  if (!duplicate.empty()) {
    throw Error(where + (duplicate_is_tensor ? ": duplicate tensor name " : ": duplicate key ") +
                in_quotes(duplicate) + " in the header; the file is corrupt");
  }
  return header;
}

std::map<std::string, std::string> parse_metadata(const json& meta, const std::string& where) {
  std::map<std::string, std::string> out;
  if (meta.is_null()) return out;
  check(meta.is_object(), where + ": __metadata__ must be an object of strings");
  for (const auto& [key, value] : meta.items()) {
    check(value.is_string(), where + ": __metadata__ value for " + in_quotes(key) +
                                 " is not a string (safetensors metadata is string to string)");
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

// A non-negative JSON integer that fits int64, or an error naming `what`.
int64_t header_int(const json& v, const std::string& what) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    check(u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), what + " is too large");
    return static_cast<int64_t>(u);
  }
  check(v.is_number_integer(), what + " is not an integer");
  const int64_t i = v.get<int64_t>();
  check(i >= 0, what + " is negative (" + std::to_string(i) + ")");
  return i;
}

struct Span {
  uint64_t begin, end;
};

// Checks one header entry against the data section and fills `view` (data pointer included).
// Returns false for a BOOL tensor: checked like the others (its bytes take part in the overlap
// check) but not listed, as no model loads one (an EAGLE-3 head's t2d mask is one).
bool parse_tensor(const std::string& name, const json& entry, const uint8_t* data,
                  uint64_t data_size, const std::string& where, TensorView* view, Span* span) {
  const std::string tw = where + ": tensor " + in_quotes(name);
  check(entry.is_object(), tw + " is not an object with dtype, shape and data_offsets");
  auto field = [&](const char* key) -> const json& {
    auto it = entry.find(key);
    check(it != entry.end(), tw + " has no " + key);
    return *it;
  };
  const json& dtype = field("dtype");
  const json& shape = field("shape");
  const json& offsets = field("data_offsets");
  check(dtype.is_string(), tw + ": dtype is not a string");
  const std::string dtype_str = dtype.get<std::string>();
  const bool listed = dtype_str != "BOOL";
  if (!listed) view->dtype = DType::F8_E4M3;  // one byte per element, for the size checks below
  check(!listed || parse_safetensors_dtype(dtype_str, &view->dtype),
        tw + " has dtype " + dtype_str +
            "; pagoda loads BF16, F16 and F32 (and F8_E4M3 / I32 / I64 for quantized weights and index tables)");
  check(shape.is_array(), tw + ": shape is not an array");
  // Every running product must fit int64, so TensorView::numel() cannot overflow either.
  int64_t numel = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t dim = header_int(shape[d], tw + ": shape[" + std::to_string(d) + "]");
    view->shape.push_back(dim);
    check(!__builtin_mul_overflow(numel, dim, &numel), tw + ": shape overflows");
  }
  check(offsets.is_array() && offsets.size() == 2, tw + ": data_offsets is not [begin, end]");
  span->begin = static_cast<uint64_t>(header_int(offsets[0], tw + ": data_offsets[0]"));
  span->end = static_cast<uint64_t>(header_int(offsets[1], tw + ": data_offsets[1]"));
  check(span->begin <= span->end, tw + ": data_offsets begin " + std::to_string(span->begin) +
                                      " is after end " + std::to_string(span->end));
  check(span->end <= data_size, tw + ": data_offsets end " + std::to_string(span->end) +
                                    " is outside the data section (" + std::to_string(data_size) +
                                    " bytes); the file is truncated or corrupt");
  uint64_t nbytes = 0;
  const uint64_t elem = dtype_size(view->dtype);
  check(!__builtin_mul_overflow(static_cast<uint64_t>(numel), elem, &nbytes),
        tw + ": shape overflows");
  check(nbytes == span->end - span->begin,
        tw + ": data_offsets span " + std::to_string(span->end - span->begin) +
            " bytes but shape x " + dtype_str + " needs " + std::to_string(nbytes));
  view->data = data + span->begin;
  view->nbytes = static_cast<size_t>(nbytes);
  // Consumers read tensors as typed arrays; a misaligned one would be undefined behaviour there.
  check(reinterpret_cast<uintptr_t>(view->data) % elem == 0,
        tw + " is not aligned to its " + std::to_string(elem) +
            "-byte element size; re-save the checkpoint with the safetensors library");
  return listed;
}

// Tensors must not share bytes; empty tensors occupy none and cannot overlap anything.
void check_no_overlap(const std::vector<TensorView>& tensors, const std::vector<Span>& spans,
                      const std::string& where) {
  std::vector<size_t> order;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].begin != spans[i].end) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return spans[a].begin < spans[b].begin; });
  for (size_t k = 1; k < order.size(); ++k) {
    const Span& prev = spans[order[k - 1]];
    const Span& cur = spans[order[k]];
    if (cur.begin < prev.end) {
      throw Error(where + ": tensors " + in_quotes(tensors[order[k - 1]].name) + " and " +
                  in_quotes(tensors[order[k]].name) +
                  " overlap in the data section; the file is corrupt");
    }
  }
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // cannot overflow: parse() checked every running product
  return n;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* bytes, size_t size,
                                                        const std::string& label) {
  check(size >= 8, label + ": file is " + std::to_string(size) +
                       " bytes, too short for the 8-byte header length of a safetensors file");
  const uint64_t header_len = read_u64_le(bytes);
  check(header_len <= size - 8, label + ": header length " + std::to_string(header_len) +
                                    " exceeds the file size " + std::to_string(size) +
                                    "; the file is truncated or not safetensors");
  check(header_len <= kMaxHeaderBytes, label + ": header length " + std::to_string(header_len) +
                                           " is over the 100 MB limit; the file is corrupt");
  const uint8_t* header_begin = bytes + 8;
  const uint8_t* data = header_begin + header_len;
  const uint64_t data_size = size - 8 - header_len;
  const json header = parse_header_json(header_begin, data, label);

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = label;
  std::vector<Span> spans, unlisted_spans;
  std::vector<TensorView> unlisted;  // BOOL tensors: only for the overlap check
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      file->metadata_ = parse_metadata(entry, label);
      continue;
    }
    TensorView view;
    view.name = name;
    Span span{};
    if (parse_tensor(name, entry, data, data_size, label, &view, &span)) {
      file->tensors_.push_back(std::move(view));
      spans.push_back(span);
    } else {
      unlisted.push_back(std::move(view));
      unlisted_spans.push_back(span);
    }
  }
  if (unlisted.empty()) {
    check_no_overlap(file->tensors_, spans, label);
  } else {
    std::vector<TensorView> all = file->tensors_;
    all.insert(all.end(), unlisted.begin(), unlisted.end());
    spans.insert(spans.end(), unlisted_spans.begin(), unlisted_spans.end());
    check_no_overlap(all, spans, label);
  }
  return file;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto map = std::make_unique<MappedFile>(path);
  auto file = parse(map->data(), map->size(), path);
  file->map_ = std::move(map);
  for (TensorView& t : file->tensors_) t.file_backed = true;
  return file;
}

SafetensorsFile::~SafetensorsFile() = default;

}  // namespace pagoda
