import Foundation

/// One `vipsload` command, as the command list, `help` and dispatch see it.
///
/// `main.swift` holds the one list of commands; the top-level usage text
/// (`Command.usage(of:)`), `vipsload help COMMAND` and dispatch all read it,
/// so adding a command is adding its entry.
struct Command: Sendable {
    /// How the process treats SIGINT and SIGTERM while the command runs.
    enum Signals: Sendable {
        /// Cancel the command's task and exit 130/143 once it has wound down (`SignalHandling`).
        case cancelTheCommand
        /// The default: the signal ends the process at once.
        case endTheProcess
        /// The command installs its own handlers (the server drains on the first signal).
        case handledByTheCommand
    }

    /// The name typed after `vipsload`.
    let name: String
    /// Other names that run it (`--version`, `-V`).
    var aliases: [String] = []
    /// One line for the command list.
    let summary: String
    /// What `vipsload help NAME` and `vipsload NAME --help` print.
    let usage: String
    var signals: Signals = .cancelTheCommand
    /// Runs the command on the arguments after its name; returns the exit status.
    let run: @Sendable ([String]) async throws(ArgumentParser.UsageError) -> Int32

    /// Whether `word` names this command.
    func isNamed(_ word: String) -> Bool { word == name || aliases.contains(word) }

    /// The top-level usage text: every command with its summary.
    static func usage(of commands: [Command]) -> String {
        let width = commands.map(\.name.count).max() ?? 0
        let list = commands.map { command in
            "  " + command.name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + command.summary
        }
        return """
            usage: vipsload <command> [options]

            commands:
            \(list.joined(separator: "\n"))

            Run 'vipsload <command> --help' for a command's options.

            Exit status: 0 on success, 1 when any input failed, 2 on usage errors.
            """
    }

    /// Runs the command named by `arguments[0]` (the top-level usage without
    /// one) and exits with its status: 2 for an unknown command or a usage error.
    static func dispatch(_ arguments: [String], among commands: [Command]) async -> Never {
        guard let word = arguments.first else {
            Terminal.err(usage(of: commands))
            exit(2)
        }
        guard let command = commands.first(where: { $0.isNamed(word) }) else {
            Terminal.err("vipsload: unknown command '\(word)'\n\n\(usage(of: commands))")
            exit(2)
        }
        let rest = Array(arguments.dropFirst())
        do throws(ArgumentParser.UsageError) {
            switch command.signals {
            case .cancelTheCommand:
                // SIGINT/SIGTERM cancel the command, remove its temporary downloads and exit 130/143.
                exit(try await SignalHandling.run(command.run, rest))
            case .endTheProcess, .handledByTheCommand:
                exit(try await command.run(rest))
            }
        } catch {
            Terminal.err(
                "vipsload \(command.name): \(error.description)\nRun 'vipsload \(command.name) --help' for usage.")
            exit(2)
        }
    }

    /// `vipsload version`.
    static func version(_ usage: String) -> Command {
        Command(
            name: "version", aliases: ["--version", "-V"],
            summary: "print the VipsLoad and libvips versions (also --version, -V)", usage: usage,
            signals: .endTheProcess
        ) { _ throws(ArgumentParser.UsageError) in
            Terminal.out(Version.text)
            return 0
        }
    }

    /// `vipsload help [COMMAND]`: the usage of `commands()` (the whole list, this entry included).
    static func help(_ commands: @escaping @Sendable () -> [Command]) -> Command {
        Command(
            name: "help", aliases: ["--help", "-h"],
            summary: "print this, or a command's options ('vipsload help thumb')",
            usage: "usage: vipsload help [COMMAND]\n\nPrints the commands, or COMMAND's options.",
            signals: .endTheProcess
        ) { arguments throws(ArgumentParser.UsageError) in
            let all = commands()
            guard let topic = arguments.first else {
                Terminal.out(usage(of: all))
                return 0
            }
            guard let command = all.first(where: { $0.name == topic }) else {
                Terminal.err("vipsload help: unknown command '\(topic)'\n\n\(usage(of: all))")
                return 2
            }
            Terminal.out(command.usage)
            return 0
        }
    }
}
