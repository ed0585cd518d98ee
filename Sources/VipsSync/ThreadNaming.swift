import CSystem

/// Names the calling thread, as `ps -L`, `top -H`, debuggers and
/// `/proc/self/task/*/comm` show it.
package enum ThreadNaming {
    /// The longest name the kernel keeps, in bytes (`TASK_COMM_LEN` less the NUL).
    package static let maxLength = 15

    /// Names the calling thread `name`, cut to `maxLength` bytes.
    package static func setCurrentThreadName(_ name: String) {
        var bytes = Array(name.utf8.prefix(maxLength))
        bytes.append(0)
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { _ = vl_set_current_thread_name($0.baseAddress) }
        }
    }
}
