// read_file: sized from the open descriptor, read straight into the result.
#include "tern/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tern/base/error.h"

namespace tern {

std::string read_file(const std::string& path, std::string_view area) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TERN_CHECK(fd >= 0, "[{}] expected a readable file {}, got {}", area, path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TERN_THROW("[{}] expected a regular file {}, got {}", area, path, "something else");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      TERN_THROW("[{}] expected {} bytes from {}, got {} ({})", area, out.size(), path, done,
                 n == 0 ? "end of file" : std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

}  // namespace tern
