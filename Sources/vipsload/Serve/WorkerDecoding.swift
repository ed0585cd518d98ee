import Foundation
import VipsCore
import VipsLoad
import VipsServe

/// `vipsload serve --isolate`: the server's isolated decode step, filled
/// with the decode worker processes `thumb --isolate` uses (`WorkerPool`),
/// each request sending its own size and resize mode. Which formats go to
/// the workers is `IsolationFlags.Settings.isolates`, the one place of that
/// policy for every command.
struct WorkerDecoding: IsolatedDecoding {
    let workers: WorkerPool
    let settings: IsolationFlags.Settings

    func isolates(_ format: ImageFormat?) -> Bool {
        settings.isolates(format)
    }

    func decode(_ input: ImageInput, for request: ImageRequest) async -> Result<Bitmap, VipsError> {
        let geometry = WorkerProtocol.Geometry(
            size: request.size, mode: request.mode, scale: request.scale,
            allowUpscale: request.options.contains(.allowUpscale),
            keepMetadata: request.options.contains(.keepMetadata))
        // Messages name the request's source, never a download's file.
        let name = request.source.description
        let output: Result<ThumbEngine.Output, VipsError>
        switch input {
        case .file(let path): output = await workers.decode(path: path, name: name, geometry: geometry)
        case .data(let data): output = await workers.decode(path: nil, data: data, name: name, geometry: geometry)
        }
        return output.flatMap { decoded in
            switch decoded {
            case .still(let bitmap): return .success(bitmap)
            case .animation(let animation):
                guard let first = animation.frames.first else {
                    return .failure(VipsError(.corruptData, "\(request.source): an animation without frames"))
                }
                return .success(first)
            }
        }
    }
}
