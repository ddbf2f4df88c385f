#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace pagoda {

namespace {

std::string errno_text() { return std::strerror(errno); }

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO given by mistake must fail below, not block open() forever.
  FdGuard guard{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (guard.fd < 0) {
    throw Error("cannot open " + path + ": " + errno_text() +
                "; check that the file exists and is readable");
  }
  struct stat st {};
  if (::fstat(guard.fd, &st) != 0) throw Error("cannot stat " + path + ": " + errno_text());
  if (S_ISDIR(st.st_mode)) {
    throw Error(path + " is a directory, expected a file; pass the file inside it");
  }
  if (!S_ISREG(st.st_mode)) throw Error(path + " is not a regular file");
  if (st.st_size <= 0) {
    throw Error(path + " is empty (0 bytes); the download or save was probably interrupted");
  }
  size_ = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, guard.fd, 0);
  if (p == MAP_FAILED) {
    throw Error("cannot mmap " + path + " (" + std::to_string(size_) + " bytes): " + errno_text());
  }
  data_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace pagoda
