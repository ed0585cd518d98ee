extension VipsError.Kind {
    /// The server answered with a status other than 2xx; the message starts
    /// with `HTTP <status>`.
    public static let httpStatus = Self(rawValue: "httpStatus")
    /// The connection could not be made, or was dropped or reset before the
    /// body was complete; the message gives the reason.
    public static let network = Self(rawValue: "network")
    /// The body ended before the length its `Content-Length` declared.
    public static let incompleteBody = Self(rawValue: "incompleteBody")
    /// No byte arrived within the request timeout, or the whole transfer took
    /// longer than the resource timeout.
    public static let timedOut = Self(rawValue: "timedOut")
    /// More redirects than allowed, or a redirect to a scheme other than http(s).
    public static let redirectRefused = Self(rawValue: "redirectRefused")
}
