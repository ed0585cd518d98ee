import VipsCore

extension VipsError {
    /// The message without the leading "`input`: " the library adds for
    /// library users, since every CLI line already names its input.
    func message(about input: String) -> String {
        let subject = input + ": "
        guard message.hasPrefix(subject), message.count > subject.count else { return message }
        return String(message.dropFirst(subject.count))
    }
}
