#include "common/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errors.h"

namespace mobius::data {
namespace {

constexpr char kMagic[8] = {'M', 'O', 'B', 'T', 'O', 'K', 'v', '1'};
constexpr uint32_t kHeaderBytes = 64;

struct Header {
  char magic[8];
  uint32_t header_bytes;
  uint32_t token_bytes;
  uint64_t vocab_size;
  uint64_t num_tokens;
  uint64_t num_docs;
  uint64_t flags;
  uint64_t reserved[2];
};
static_assert(sizeof(Header) == kHeaderBytes);

absl::StatusOr<std::pair<void*, size_t>> MapFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("token file ", path));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": not a regular file"));
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* map = nullptr;
  if (size > 0) {
    map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      absl::Status s = MOBIUS_ERRNO_ERROR(absl::StrCat("mmap token file ", path));
      close(fd);
      return s;
    }
  }
  close(fd);
  return std::make_pair(map, size);
}

}  // namespace

TokenFile::~TokenFile() {
  if (map_ != nullptr) munmap(map_, map_bytes_);
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Open(const std::string& path) {
  auto mapped = MapFile(path);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<TokenFile> f(new TokenFile());
  f->map_ = mapped->first;
  f->map_bytes_ = mapped->second;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": ", why));
  };
  if (f->map_bytes_ < kHeaderBytes) return bad("shorter than the 64-byte header");
  Header h;
  std::memcpy(&h, f->map_, sizeof(h));
  if (std::memcmp(h.magic, kMagic, 8) != 0) {
    return bad("bad magic (not a Mobius token file; headerless files need the raw format)");
  }
  if (h.header_bytes != kHeaderBytes) return bad("unsupported header size");
  if (h.token_bytes != 2 && h.token_bytes != 4) return bad("token size must be 2 or 4 bytes");
  if (h.vocab_size == 0 || h.vocab_size > (uint64_t{1} << 32)) return bad("vocab size out of range");
  const bool masked = (h.flags & 1) != 0;
  // Every section must fit: compare in 128-bit-safe steps.
  const uint64_t avail = f->map_bytes_ - kHeaderBytes;
  if (h.num_tokens > avail / h.token_bytes || h.num_docs >= (uint64_t{1} << 40)) {
    return bad("token count does not match the file size");
  }
  uint64_t need = h.num_tokens * h.token_bytes + (h.num_docs + 1) * 8 + (masked ? h.num_tokens : 0);
  if (need != avail) {
    return bad(absl::StrCat("file has ", avail, " bytes after the header, expected ", need));
  }
  f->token_bytes_ = static_cast<int>(h.token_bytes);
  f->vocab_size_ = static_cast<int64_t>(h.vocab_size);
  f->num_tokens_ = static_cast<int64_t>(h.num_tokens);
  f->num_docs_ = static_cast<int64_t>(h.num_docs);
  const uint8_t* base = static_cast<const uint8_t*>(f->map_) + kHeaderBytes;
  f->tokens_ = base;
  f->doc_starts_ = reinterpret_cast<const uint64_t*>(base + h.num_tokens * h.token_bytes);
  if (masked) f->mask_ = base + h.num_tokens * h.token_bytes + (h.num_docs + 1) * 8;
  uint64_t prev = 0;
  for (int64_t d = 0; d <= f->num_docs_; ++d) {
    uint64_t s = f->doc_start(d);
    if ((d == 0 && s != 0) || s < prev || s > h.num_tokens ||
        (d == f->num_docs_ && s != h.num_tokens)) {
      return bad(absl::StrCat("document start ", d, " (", s, ") is out of order or range"));
    }
    prev = s;
  }
  return f;
}

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::OpenRaw(const std::string& path,
                                                              int token_bytes, int64_t vocab_size) {
  if (token_bytes != 2 && token_bytes != 4) {
    return absl::InvalidArgumentError("raw token files hold 2- or 4-byte ids");
  }
  auto mapped = MapFile(path);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<TokenFile> f(new TokenFile());
  f->map_ = mapped->first;
  f->map_bytes_ = mapped->second;
  if (f->map_bytes_ % token_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": ", f->map_bytes_,
                                                   " bytes is not a multiple of ", token_bytes));
  }
  f->token_bytes_ = token_bytes;
  f->vocab_size_ = vocab_size;
  f->num_tokens_ = static_cast<int64_t>(f->map_bytes_ / token_bytes);
  f->num_docs_ = 1;
  f->tokens_ = static_cast<const uint8_t*>(f->map_);
  return f;
}

uint32_t TokenFile::token(int64_t i) const {
  if (token_bytes_ == 2) {
    uint16_t v;
    std::memcpy(&v, tokens_ + 2 * i, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, tokens_ + 4 * i, 4);
  return v;
}

bool TokenFile::is_target(int64_t i) const { return mask_ == nullptr || mask_[i] != 0; }

int64_t TokenFile::doc_start(int64_t d) const {
  if (doc_starts_ == nullptr) return d == 0 ? 0 : num_tokens_;
  uint64_t v;
  std::memcpy(&v, doc_starts_ + d, 8);
  return static_cast<int64_t>(v);
}

absl::Status WriteTokenFile(const std::string& path, const std::vector<TokenizedDoc>& docs,
                            int64_t vocab_size) {
  if (vocab_size <= 0 || vocab_size > (int64_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("vocab size ", vocab_size, " out of range"));
  }
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.header_bytes = kHeaderBytes;
  h.token_bytes = vocab_size <= 65536 ? 2 : 4;
  h.vocab_size = static_cast<uint64_t>(vocab_size);
  bool masked = false;
  std::string tokens, starts, mask;
  uint64_t n = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    const TokenizedDoc& doc = docs[d];
    if (!doc.target.empty() && doc.target.size() != doc.ids.size()) {
      return absl::InvalidArgumentError(absl::StrCat("document ", d, ": mask length differs"));
    }
    masked |= !doc.target.empty();
    starts.append(reinterpret_cast<const char*>(&n), 8);
    for (size_t i = 0; i < doc.ids.size(); ++i) {
      int64_t id = doc.ids[i];
      if (id < 0 || id >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("document ", d, " position ", i, ": token id ",
                                                       id, " outside the vocabulary [0, ", vocab_size, ")"));
      }
      uint32_t v = static_cast<uint32_t>(id);
      tokens.append(reinterpret_cast<const char*>(&v), h.token_bytes);
    }
    n += doc.ids.size();
  }
  starts.append(reinterpret_cast<const char*>(&n), 8);
  if (masked) {
    for (const TokenizedDoc& doc : docs) {
      if (doc.target.empty()) {
        mask.append(doc.ids.size(), '\1');
      } else {
        for (uint8_t m : doc.target) mask.push_back(m ? '\1' : '\0');
      }
    }
  }
  h.num_tokens = n;
  h.num_docs = docs.size();
  h.flags = masked ? 1 : 0;

  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("create ", tmp));
  auto write_all = [&](const void* p, size_t len) {
    const char* c = static_cast<const char*>(p);
    while (len > 0) {
      ssize_t w = write(fd, c, len);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      c += w;
      len -= static_cast<size_t>(w);
    }
    return true;
  };
  bool ok = write_all(&h, sizeof(h)) && write_all(tokens.data(), tokens.size()) &&
            write_all(starts.data(), starts.size()) && write_all(mask.data(), mask.size()) &&
            fsync(fd) == 0;
  absl::Status s = ok ? absl::OkStatus() : MOBIUS_ERRNO_ERROR(absl::StrCat("write ", tmp));
  close(fd);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = MOBIUS_ERRNO_ERROR(absl::StrCat("rename to ", path));
  }
  if (!s.ok()) unlink(tmp.c_str());
  return s;
}

}  // namespace mobius::data
