package rialto.interop;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/** A minimal `--name value` / `--flag` command-line parser shared by the three programs. */
final class Args {
    /** Exit code for a bad command line (0 pass, 1 fail, 2 timeout are the interop test's). */
    static final int EXIT_USAGE = 3;

    private final Map<String, String> values = new HashMap<>();

    private Args() {}

    static Args parse(String[] argv, Set<String> options, Set<String> flags, String usage) {
        Args args = new Args();
        for (int i = 0; i < argv.length; i++) {
            String name = argv[i];
            if (name.equals("-h") || name.equals("--help")) {
                System.out.println(usage);
                System.exit(0);
            } else if (flags.contains(name)) {
                args.values.put(name, "true");
            } else if (options.contains(name)) {
                if (i + 1 >= argv.length) {
                    usageError(usage, name + " needs a value");
                }
                args.values.put(name, argv[++i]);
            } else {
                usageError(usage, "unknown argument " + name);
            }
        }
        return args;
    }

    static void usageError(String usage, String why) {
        System.err.println("error: " + why);
        System.err.println(usage);
        System.exit(EXIT_USAGE);
    }

    String get(String name, String fallback) {
        return values.getOrDefault(name, fallback);
    }

    String require(String name, String usage) {
        String value = values.get(name);
        if (value == null) {
            usageError(usage, name + " is required");
        }
        return value;
    }

    boolean flag(String name) {
        return values.containsKey(name);
    }

    int integer(String name, int fallback, String usage) {
        String value = values.get(name);
        if (value == null) {
            return fallback;
        }
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException e) {
            usageError(usage, name + " must be an integer, got " + value);
            return fallback;
        }
    }
}
