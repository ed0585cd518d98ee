import CVipsShim

extension ImageDecoder {
    /// Opens `input` once for one call and runs `body` with it: admits it
    /// (size, magic bytes, allowed formats), reads its header with its
    /// format's direct codec (`CodecRegistry`) when that codec takes the
    /// image, else with libvips, and checks the limits against that header
    /// before `body` runs. `info`, `decode` and the resize modes all start
    /// here, so they read one header, the same way.
    func withImage<R>(_ input: ImageInput, _ body: (OpenedImage) throws(VipsError) -> R) throws(VipsError) -> R {
        let format = try admit(input)
        if let codec = CodecRegistry.codec(for: format), usesDirectPaths || codec.decodesAlone,
            let result = try withDirectHeader(codec, input, { image throws(VipsError) in try body(.direct(image)) })
        {
            return result
        }
        if format == .tiff { return try withTIFF(input, body) }
        return try withLibvipsHeader(input, format: format) { header, source throws(VipsError) in
            try body(.libvips(header, source))
        }
    }

    /// A TIFF: libvips reads it, and when libvips refuses it (its header or,
    /// within `body`, its pixels: a layout tiffload 8.14 does not read),
    /// libtiff's RGBA interface does (`TIFFRGBACodec`), reporting the header
    /// libvips had read, if it had. A stop (cancellation, time limit), a limit
    /// and an unreadable file are answers, not refusals; when libtiff cannot
    /// read the file either, libvips' reason is the one given.
    private func withTIFF<R>(_ input: ImageInput, _ body: (OpenedImage) throws(VipsError) -> R) throws(VipsError) -> R {
        var probed: ImageInfo?
        let refusal: VipsError
        do throws(VipsError) {
            return try withLibvipsHeader(input, format: .tiff) { header, source throws(VipsError) in
                probed = header.info
                return try body(.libvips(header, source))
            }
        } catch {
            guard [.unsupportedFeature, .corruptData, .truncatedData].contains(error.kind) else { throw error }
            refusal = error
        }
        VipsRuntime.discardErrorMessages()
        do throws(VipsError) {
            let codec = TIFFRGBACodec(knownInfo: probed)
            let result = try withDirectHeader(codec, input) { image throws(VipsError) in try body(.direct(image)) }
            guard let result else { throw refusal }
            return result
        } catch {
            if [.cancelled, .timedOut, .tooLarge].contains(error.kind) { throw error }
            throw refusal
        }
    }

    /// `body` over the header `codec` read, when it takes the image; nil when libvips must read it.
    private func withDirectHeader<Codec: DirectCodec, R>(
        _ codec: Codec, _ input: ImageInput, _ body: (DirectImage) throws(VipsError) -> R
    ) throws(VipsError) -> R? {
        try codec.withHeader(input, options: options, label: name(of: input)) { reading throws(VipsError) -> R? in
            guard case .read(let header) = reading, route(codec, header) == .direct else { return nil }
            let image = DirectImage(codec, header, options: options, label: name(of: input))
            // Limits from the header, before the codec allocates anything.
            try options.limits.check(image.info, label: name(of: input))
            return try body(image)
        }
    }

    /// Whether `codec` takes an image from its header, at any size: the common preconditions, then the codec's.
    private func route<Codec: DirectCodec>(_ codec: Codec, _ header: Codec.Header) -> DecodeRoute {
        if codec.decodesAlone { return codec.route(header, options: options) }
        return DecodeRoute.preconditions(options, allowUpscale: false) ?? codec.route(header, options: options)
    }

    /// Starts libvips, probes `input`'s header with `format`'s loader and runs `body` with it and its source.
    func withLibvipsHeader<R>(
        _ input: ImageInput, format: ImageFormat,
        _ body: (LibvipsHeader, UnsafeMutablePointer<VipsSource>) throws(VipsError) -> R
    ) throws(VipsError) -> R {
        let loader = try libvipsLoader(for: format, label: name(of: input))
        return try input.withSource { source throws(VipsError) in
            try body(try probe(source, loader: loader, label: name(of: input)), source)
        }
    }

    /// The direct decode of `image` for `request`; nil when libvips decodes the pixels instead.
    func decodeDirectly(_ image: DirectImage, _ request: DecodeRequest) throws(VipsError) -> Bitmap? {
        if image.decodesAlone {
            guard let bitmap = try image.decode(request) else {
                throw VipsError(.internal, "\(image.label): the \(image.info.format) decoder gave no pixels")
            }
            return try fitted(bitmap, request, label: image.label)
        }
        guard DecodeRoute.preconditions(options, allowUpscale: request.allowUpscale) == nil,
            image.route(request) == .direct
        else { return nil }
        return try image.decode(request)
    }

    // MARK: - Diagnostics

    /// The route `decode` takes for `input` into `size`, for tests and diagnostics.
    ///
    /// - Throws: what `decode` throws before any decoder runs: an input that
    ///   cannot be read, is empty or refused, or a truncated WebP.
    func route(
        _ input: ImageInput, size: TargetSize = .original, scale: Double = 1, allowUpscale: Bool = false
    ) throws(VipsError) -> DecodeRoute {
        let format = try admit(input)
        guard let codec = CodecRegistry.codec(for: format), usesDirectPaths || codec.decodesAlone else {
            return .libvips("no direct codec for \(format) images")
        }
        return try route(codec, input, DecodeRequest(size: size, scale: scale, allowUpscale: allowUpscale))
    }

    private func route<Codec: DirectCodec>(
        _ codec: Codec, _ input: ImageInput, _ request: DecodeRequest
    ) throws(VipsError) -> DecodeRoute {
        if !codec.decodesAlone, let route = DecodeRoute.preconditions(options, allowUpscale: request.allowUpscale) {
            return route
        }
        return try codec.withHeader(input, options: options, label: name(of: input)) {
            reading throws(VipsError) -> DecodeRoute in
            switch reading {
            case .unread(let reason):
                return .libvips(reason)
            case .read(let header):
                let route = codec.route(header, options: options)
                return route == .direct ? codec.route(header, for: request, options: options) : route
            }
        }
    }

    /// Decodes `input` with its format's direct codec only: nil when `decode`
    /// hands it to libvips. For tests and the fuzz harness.
    func decodeDirectly(
        _ input: ImageInput, size: TargetSize = .original, scale: Double = 1, allowUpscale: Bool = false
    ) throws(VipsError) -> Bitmap? {
        let format = try admit(input)
        guard let codec = CodecRegistry.codec(for: format), usesDirectPaths || codec.decodesAlone else { return nil }
        let request = DecodeRequest(size: size, scale: scale, allowUpscale: allowUpscale)
        let bitmap = try withDirectHeader(codec, input) { image throws(VipsError) in
            try decodeDirectly(image, request)?.withSource(BitmapSource(info: image.info, decodedLeniently: false))
        }
        return bitmap ?? nil
    }
}
