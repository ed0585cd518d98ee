/// This process's share of the inputs: shard `index` (from 1) of `count`.
///
/// Membership is decided per input, by `StableHash` of its key (the path or
/// URL as named), so the shards of one input set are disjoint, their union is
/// the whole set, and adding inputs never moves the others between shards.
struct Shard: Equatable, CustomStringConvertible {
    /// From 1 to `count`.
    let index: Int
    let count: Int
    /// Where it came from, for `--verbose`: "--shard" or the environment variable.
    var origin = "--shard"

    static let all = Shard(index: 1, count: 1)

    var description: String { "\(index)/\(count)" }

    func contains(_ key: String) -> Bool {
        count == 1 || Int(StableHash.value(key) % UInt64(count)) == index - 1
    }

    /// `--shard K/N` (K from 1 to N).
    static func parse(_ text: String) throws(ArgumentParser.UsageError) -> Shard {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let index = Int(parts[0]), let count = Int(parts[1]), count >= 1, count <= 1_000_000,
            (1...count).contains(index)
        else {
            throw ArgumentParser.UsageError(
                description: "--shard takes K/N with 1 ≤ K ≤ N (for example 1/4), not '\(text)'")
        }
        return Shard(index: index, count: count)
    }

    /// The shard the job engine running this process assigned, if any:
    /// a Kubernetes Indexed Job (`JOB_COMPLETION_INDEX`, counted by
    /// `shardCount`), a Slurm job array (`SLURM_ARRAY_TASK_ID` from
    /// `SLURM_ARRAY_TASK_MIN`, `SLURM_ARRAY_TASK_COUNT`), or an AWS Batch array
    /// job (`AWS_BATCH_JOB_ARRAY_INDEX`, counted by `shardCount` or
    /// `AWS_BATCH_JOB_ARRAY_SIZE`). Indices from the environment start at 0
    /// (Slurm's at its array's first index).
    static func fromEnvironment(
        _ environment: [String: String], shardCount: Int?
    ) throws(ArgumentParser.UsageError) -> Shard? {
        func number(_ name: String) throws(ArgumentParser.UsageError) -> Int? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            guard let value = Int(text), value >= 0 else {
                throw ArgumentParser.UsageError(description: "\(name)='\(text)' is not a shard index")
            }
            return value
        }
        func make(
            _ zeroBased: Int, _ count: Int?, _ origin: String, _ countHint: String
        ) throws(ArgumentParser.UsageError) -> Shard {
            guard let count else {
                throw ArgumentParser.UsageError(
                    description:
                        "\(origin) is set but the number of shards is unknown: pass --shard-count N (\(countHint))")
            }
            guard count >= 1, zeroBased < count else {
                throw ArgumentParser.UsageError(
                    description: "\(origin)=\(zeroBased) is not below the shard count \(count)")
            }
            return Shard(index: zeroBased + 1, count: count, origin: origin)
        }
        if let index = try number("JOB_COMPLETION_INDEX") {
            return try make(index, shardCount, "JOB_COMPLETION_INDEX", "the Job's completions")
        }
        if let id = try number("SLURM_ARRAY_TASK_ID") {
            let first = try number("SLURM_ARRAY_TASK_MIN") ?? 0
            let step = max(1, try number("SLURM_ARRAY_TASK_STEP") ?? 1)
            guard id >= first else {
                throw ArgumentParser.UsageError(
                    description: "SLURM_ARRAY_TASK_ID=\(id) is below SLURM_ARRAY_TASK_MIN=\(first)")
            }
            let arrayCount = try number("SLURM_ARRAY_TASK_COUNT")
            return try make(
                (id - first) / step, shardCount ?? arrayCount, "SLURM_ARRAY_TASK_ID",
                "the array's task count")
        }
        if let index = try number("AWS_BATCH_JOB_ARRAY_INDEX") {
            let size = try number("AWS_BATCH_JOB_ARRAY_SIZE")
            return try make(
                index, shardCount ?? size, "AWS_BATCH_JOB_ARRAY_INDEX",
                "the array job's size")
        }
        if shardCount != nil {
            throw ArgumentParser.UsageError(
                description:
                    "--shard-count needs a shard index from the environment (JOB_COMPLETION_INDEX, SLURM_ARRAY_TASK_ID or AWS_BATCH_JOB_ARRAY_INDEX), or use --shard K/N"
            )
        }
        return nil
    }
}
