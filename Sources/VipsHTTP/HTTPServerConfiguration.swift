extension HTTPServer {
    /// Where the server listens and the limits libmicrohttpd enforces.
    package struct Configuration: Sendable {
        /// An IPv4 or IPv6 address literal ("127.0.0.1", "0.0.0.0", "::").
        package var address: String
        /// The port; 0 lets the kernel choose one (read it back from `HTTPServer.port`).
        package var port: UInt16
        /// Open connections at most; more are refused at once.
        package var maxConnections: Int
        /// Open connections per client address at most; 0 for no limit.
        package var maxConnectionsPerIP: Int
        /// A connection idle this long (no byte received or sent while it is
        /// not suspended) is closed, in seconds; 0 for never.
        package var connectionTimeoutSeconds: Int
        /// Bytes of memory per connection, which bound the request line and
        /// header fields (libmicrohttpd answers 431 or 414 beyond them).
        package var connectionMemoryBytes: Int
        /// Threads serving connections, each with its own epoll set.
        package var threads: Int
        /// Pending connections the kernel queues before the server accepts them.
        package var listenBacklog: Int
        /// A request's header section must be complete this long after the
        /// accept (a kept-alive connection's next one, `connectionTimeoutSeconds`
        /// plus this long after the previous response), however slowly its
        /// bytes come, else the connection is closed; nil for no deadline
        /// (`ConnectionDeadlines`).
        package var headerTimeout: Duration? = .seconds(10)

        /// A configuration; each parameter is the property of its name.
        package init(
            address: String, port: UInt16, maxConnections: Int, maxConnectionsPerIP: Int,
            connectionTimeoutSeconds: Int, connectionMemoryBytes: Int, threads: Int, listenBacklog: Int,
            headerTimeout: Duration? = .seconds(10)
        ) {
            self.address = address
            self.port = port
            self.maxConnections = maxConnections
            self.maxConnectionsPerIP = maxConnectionsPerIP
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.connectionMemoryBytes = connectionMemoryBytes
            self.threads = threads
            self.listenBacklog = listenBacklog
            self.headerTimeout = headerTimeout
        }
    }
}
