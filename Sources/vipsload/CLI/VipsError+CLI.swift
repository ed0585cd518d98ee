import VipsCore
import VipsLoad

extension VipsError {
    /// The message without the leading "`input`: " the library adds for
    /// library users, since every CLI line already names its input.
    func message(about input: String) -> String {
        // The library names a URL without its credentials.
        for subject in [input + ": ", URLRedaction.redacted(input) + ": "]
        where message.hasPrefix(subject) && message.count > subject.count {
            return String(message.dropFirst(subject.count))
        }
        return message
    }
}

extension VipsError {
    /// The error with `path` (a download's temporary or cache file) replaced
    /// by `source` (its URL) in the message: a message names what the user
    /// asked for, never a file the pipeline made.
    func naming(_ source: ImageSource, insteadOf path: String) -> VipsError {
        VipsError(kind, message.replacingOccurrences(of: path, with: source.description), httpStatus: httpStatus)
    }
}
