// read_file: sized from the open descriptor, read straight into the result up to the end of file. write_file_atomic: a
// temporary file, fsync, rename, and the directory fsynced.
#include "tern/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tern/base/error.h"

namespace tern {

std::string read_file(const std::string& path, std::string_view area) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TERN_CHECK(fd >= 0, "[{}] {}: expected a readable file, got {}", area, path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TERN_THROW("[{}] {}: expected a regular file, got {}", area, path, S_ISDIR(st.st_mode) ? "a directory" : "something else");
  }
  // Sized from fstat, then read to the end of file: a file that reports a size of 0 but has content
  // (/proc, /sys) is read whole too, instead of as empty.
  std::string out(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t done = 0;
  for (;;) {
    if (done == out.size()) out.resize(2 * out.size() + 4096);
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      TERN_THROW("[{}] {}: expected to read the file, got {} after {} bytes", area, path, std::strerror(err), done);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

void write_file_atomic(const std::string& path, std::string_view area, const std::function<void(const WriteBytes&)>& fill) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TERN_CHECK(fd >= 0, "[{}] {}: expected to create {}, got {}", area, path, tmp, std::strerror(errno));
  try {
    fill([&](const void* data, size_t n) {
      const char* p = static_cast<const char*>(data);
      while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        TERN_CHECK(w > 0, "[{}] {}: expected to write {} more bytes, got {}", area, path, n, std::strerror(errno));
        p += w;
        n -= static_cast<size_t>(w);
      }
    });
    TERN_CHECK(::fsync(fd) == 0, "[{}] {}: expected fsync to succeed, got {}", area, path, std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    TERN_THROW("[{}] {}: expected to rename the finished file into place, got {}", area, path, std::strerror(err));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace tern
