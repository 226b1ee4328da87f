<?php
/*
 * The stub carries the extension's documentation: every function, class,
 * method and class constant of distlock.stub.php has a docblock that says
 * what it does in words (a line that is not an @tag), every parameter has
 * its @param, and every function and method but a constructor its @return.
 * (@throws is written where a call throws; which calls throw is not
 * something a parser of the stub can know.)
 *
 *   php check-stub-docs.php [distlock.stub.php]
 *
 * Prints each gap and exits 1 on any; prints a summary and exits 0 if none.
 */
$stub = $argv[1] ?? __DIR__ . '/../distlock.stub.php';
$tokens = token_get_all(file_get_contents($stub));
$n = count($tokens);

/* Tokens that may stand between a docblock and what it documents. */
$between = [T_WHITESPACE, T_PUBLIC, T_PROTECTED, T_PRIVATE, T_FINAL, T_ABSTRACT, T_STATIC,
            T_READONLY, T_COMMENT];

$gaps = [];
$seen = ['function' => 0, 'class' => 0, 'constant' => 0];
$doc = null;
$class = null;       // the class being read, for names like Client::tryLock
$depth = 0;          // brace depth; $classDepth: where the current class's body is
$classDepth = -1;

function describes(string $doc): bool
{
    foreach (preg_split('/\R/', $doc) as $line) {
        $line = trim(preg_replace('#^\s*(/\*\*|\*/|\*)#', '', $line));
        $line = trim(preg_replace('#\*/$#', '', $line));
        if ($line !== '' && $line[0] !== '@') {
            return true;
        }
    }
    return false;
}

/* The next token that is not whitespace, from $i on: [index, token]. */
function next_token(array $tokens, int $i): array
{
    while ($i < count($tokens) && is_array($tokens[$i]) && $tokens[$i][0] === T_WHITESPACE) {
        $i++;
    }
    return [$i, $tokens[$i] ?? null];
}

for ($i = 0; $i < $n; $i++) {
    $t = $tokens[$i];
    if (is_array($t) && $t[0] === T_DOC_COMMENT) {
        $doc = $t[1];
        continue;
    }
    if (is_array($t) && in_array($t[0], $between, true)) {
        continue;
    }
    if (is_array($t) && $t[0] === T_ATTRIBUTE) {   // #[...] before a declaration
        for ($d = 1, $i++; $i < $n && $d > 0; $i++) {
            if ($tokens[$i] === '[') $d++;
            if ($tokens[$i] === ']') $d--;
        }
        $i--;
        continue;
    }
    if ($t === '{') {
        $depth++;
    } elseif ($t === '}') {
        $depth--;
        if ($class !== null && $depth < $classDepth) {
            $class = null;
        }
    }

    if (is_array($t) && $t[0] === T_CLASS) {
        [$i, $name] = next_token($tokens, $i + 1);
        $class = $name[1];
        $classDepth = $depth + 1;
        $seen['class']++;
        if ($doc === null || !describes($doc)) {
            $gaps[] = "class $class: no docblock saying what it is";
        }
    } elseif (is_array($t) && $t[0] === T_CONST) {
        [$i, $name] = next_token($tokens, $i + 1);
        $seen['constant']++;
        if ($doc === null || !describes($doc)) {
            $gaps[] = "constant $class::$name[1]: no docblock saying what it means";
        }
    } elseif (is_array($t) && $t[0] === T_FUNCTION) {
        [$i, $name] = next_token($tokens, $i + 1);
        $fn = ($class !== null ? "$class::" : '') . $name[1] . '()';
        $seen['function']++;
        // the parameters: the variables between the parentheses
        [$i, ] = next_token($tokens, $i + 1);      // '('
        $params = [];
        for ($d = 0; $i < $n; $i++) {
            if ($tokens[$i] === '(') $d++;
            if ($tokens[$i] === ')' && --$d === 0) break;
            if (is_array($tokens[$i]) && $tokens[$i][0] === T_VARIABLE && $d === 1) {
                $params[] = $tokens[$i][1];
            }
        }
        if ($doc === null || !describes($doc)) {
            $gaps[] = "$fn: no docblock saying what it does";
        }
        foreach ($params as $p) {
            if ($doc === null || !preg_match('/@param\s+\S+\s+' . preg_quote($p, '/') . '\b/', $doc)) {
                $gaps[] = "$fn: no @param for $p";
            }
        }
        if ($name[1] !== '__construct' && ($doc === null || !str_contains($doc, '@return'))) {
            $gaps[] = "$fn: no @return";
        }
    }
    $doc = null;   // a docblock documents the declaration right after it only
}

foreach ($gaps as $g) {
    fwrite(STDERR, basename($stub) . ": $g\n");
}
if ($gaps || $seen['function'] === 0) {
    fwrite(STDERR, "check-stub-docs: FAIL, " . count($gaps) . " gap(s)\n");
    exit(1);
}
printf("check-stub-docs: ok, %d functions and methods, %d classes, %d constants documented\n",
       $seen['function'], $seen['class'], $seen['constant']);
