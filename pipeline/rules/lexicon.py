"""The words the statement check reads: what carries no content, what means the same, and the
wording of causes, exclusivity and certainty. Data only; `pipeline.rules.statements` applies it.

A word is *content* unless it is listed here as connective, hedging or function language. The
lists are deliberately closed: a word a model uses that is neither here nor in what its
statement cites makes the statement fail, so an unknown word can only cost an answer, never let
an invention through. Nothing listed as function language names an entity, a quantity, a
direction of change, a cause, a state of health or an action.

Synonyms are matched by class (`SYNONYMS`): a statement may say "rose" where its claim says
"increased", never "fell". Each class keeps one direction and one meaning.
"""

from __future__ import annotations

import re

FUNCTION_WORDS = frozenset("""
evidence data information answer question diagnosis investigation possible direction directions
a an the this that these those it its it's they them their there here which who whom whose what
whatever where when whenever while whilst as of in on at to from by with for into onto over
under between within during after afterwards before beforehand then than later earlier
meanwhile subsequently shortly soon just right immediately once until till since through
throughout across around per via against among toward towards about upon along
and or but yet also too well both either each other another such same like including include
includes included e.g eg i.e ie etc namely respectively overall summary addition additionally
further furthermore moreover however instead rather still already currently now
is are was were be been being am has have had having do does did done will would shall should
can could may might must get got gets become became becomes
we you your yours our us i he she his her one ones itself themselves
show shows showed shown showing indicate indicates indicated indicating suggest suggests
suggested suggesting report reports reported reporting record records recorded observe observes
observed observing see sees saw seen find finds found note notes noted mention mentions
mentioned state states stated list lists listed give gives gave given read reads
say says said saying
evidence data information material finding findings observation observations signal signals
investigation analysis result results point points detail details
some several many multiple various most much few
possibly possible perhaps probably likely unlikely potentially potential maybe presumably
suspect suspected hypothesis hypotheses hypothesize hypothesized seem seems seemed
direction directions candidate candidates unclear uncertain unknown unconfirmed undetermined
whether if would
time times period window respectively total totals around approximately roughly about nearly
almost close so-called
vs versus though although whereas verdict short incident story tells told
utc gmt z
""".split())
"""Connectives, pronouns, auxiliaries, prepositions, hedges and evidential verbs."""

NEGATIONS = frozenset("""
not no never none nothing nobody neither nor without cannot can't won't don't doesn't didn't
isn't aren't wasn't weren't hasn't haven't hadn't couldn't wouldn't shouldn't absent
""".split())
"""Words that deny. A statement must deny exactly where what it cites denies."""

NOCHANGE = "nochange"
"""The class of words that say nothing moved ("flat", "unchanged", "no shift"): a denial."""

SYNONYMS: dict[str, tuple[str, ...]] = {
    "up": ("rise", "rose", "risen", "rising", "rises", "increase", "increased", "increasing",
           "jump", "jumped", "spike", "spiked", "surge", "surged", "climb", "climbed", "grow",
           "grew", "grown", "higher", "up", "elevated", "soar", "soared", "raise", "raised",
           "upward", "upwards", "more"),
    "down": ("fall", "fell", "fallen", "drop", "dropped", "decrease", "decreased", "decline",
             "declined", "lower", "lowered", "down", "reduce", "reduced", "reduction", "cut",
             "shrink", "shrank", "shrunk", "dip", "dipped", "downward", "downwards", "less",
             "fewer"),
    NOCHANGE: ("flat", "steady", "stable", "unchanged", "remain", "remained", "remains",
               "stay", "stayed", "stays", "constant", "nochange"),
    "onset": ("begin", "began", "begun", "start", "started", "onset", "appear", "appeared",
              "emerge", "emerged", "first", "new", "commence", "commenced"),
    "error": ("error", "errors", "errored", "fail", "failed", "failing", "failure",
              "reject", "rejects", "rejected", "rejecting", "refuse", "refused", "refuses",
              "failures", "fails"),
    "log": ("log", "logs", "logged", "logging", "line", "lines", "entry", "entries"),
    "deploy": ("deploy", "deployed", "deployment", "deployments", "rollout", "release",
               "released", "releases"),
    "revert": ("rollback", "revert", "reverted", "reverting", "undo"),
    "alert": ("alert", "alerts", "alarm", "alarms", "fire", "firing", "fired"),
    "restart": ("restart", "restarts", "restarted", "restarting", "crash", "crashed",
                "crashes", "crashing", "crashloop", "crashlooping"),
    "exhaust": ("exhaust", "exhausted", "exhaustion", "saturate", "saturated", "saturation",
                "depleted", "depletion", "maxed"),
    "slow": ("slow", "slowness", "slowed", "latency", "latencies", "delay", "delays",
             "delayed", "lag"),
    "request": ("request", "requests", "call", "calls"),
    "inspect": ("check", "inspect", "review", "examine", "investigate", "look", "compare",
                "verify", "watch", "monitor", "track"),
    "connection": ("connection", "connections", "conn", "conns"),
    "threshold": ("above", "exceed", "exceeded", "exceeding", "exceeds"),
    "rate": ("rate", "rates", "rps", "qps", "throughput", "traffic"),
    "db": ("db", "database", "databases"),
    "previous": ("previous", "replace", "replaced", "replaces", "replacing", "prior",
                 "former"),
    "top": ("top", "dominant", "predominant", "commonest", "prevalent"),
    "limit": ("limit", "limits", "max", "maximum", "cap", "capped", "ceiling"),
}
"""Word classes whose members a statement may use for one another."""

PHRASES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bno\s+(?:shift|change|movement)\b", re.I), "nochange"),
    (re.compile(r"\b(?:did|does|do)\s+not\s+(?:shift|change|move)\b", re.I), "nochange"),
    (re.compile(r"\broll(?:ed|ing|s)?\s+back\b", re.I), "rollback"),
    (re.compile(r"\broll(?:ed|ing|s)?\s+out\b", re.I), "rollout"),
    (re.compile(r"\b(?:ran|run|runs|running)\s+(?:out|dry)\b", re.I), "exhausted"),
    (re.compile(r"\btim(?:e|ed|es|ing)\s+out\b", re.I), "timeout"),
    (re.compile(r"(?<![^\W_])per[\s_]sec(?:ond)?\b", re.I), " rate"),
    (re.compile(r"\bwent\s+up\b", re.I), "rose"),
    (re.compile(r"\bwent\s+down\b", re.I), "fell"),
    (re.compile(r"\bwent\s+out\b", re.I), "released"),
    (re.compile(r"\bshift(?:ed|ing|s)?\s+up(?:ward)?\b", re.I), "rose"),
    (re.compile(r"\bshift(?:ed|ing|s)?\s+down(?:ward)?\b", re.I), "fell"),
]
"""Several words meaning one: rewritten to that one word before words are compared."""

IRREGULAR = {
    "rose": "rise", "risen": "rise", "fell": "fall", "fallen": "fall", "grew": "grow",
    "grown": "grow", "began": "begin", "begun": "begin", "led": "lead", "drove": "drive",
    "driven": "drive", "broke": "break", "broken": "break", "ran": "run", "went": "go",
    "shrank": "shrink", "shrunk": "shrink", "took": "take", "taken": "take", "hit": "hit",
    "brought": "bring", "kept": "keep", "held": "hold", "left": "leave", "made": "make",
    "sent": "send", "spent": "spend", "threw": "throw", "thrown": "throw", "wrote": "write",
    "written": "write", "knew": "know", "known": "know", "expiry": "expire",
    "children": "child",
}
"""Irregular verb forms a stemmer does not join to their base."""

NUMBER_WORDS = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20,
    "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
    "ninety": 90, "hundred": 100, "thousand": 1000, "million": 1_000_000, "dozen": 12,
    "twice": 2, "double": 2, "doubled": 2, "triple": 3, "tripled": 3, "half": 0.5,
    "halved": 0.5,
}
"""Numbers in words: each must be a number its statement's material states."""

# -- wording of causes, exclusivity and certainty ---------------------------------------------

CAUSAL = re.compile(
    r"\bbecause\b|\bcaus(?:e|es|ed|ing|al|ally|ation)\b|\bdue\s+(?:\w+\s+)?to\b|\bowing\s+to\b"
    r"|\bthanks\s+to\b|\bon\s+account\s+of\b|\bled\s+(?:\w+\s+)?to\b"
    r"|\blead(?:s|ing)?\s+(?:\w+\s+)?to\b"
    r"|\bresult(?:s|ed|ing)?\s+(?:\w+\s+)?(?:in|from)\b|\bas\s+a\s+(?:result|consequence)\b"
    r"|\bresult\s+of\b|\bconsequen(?:ce|ces|tly)\b|\btrigger(?:s|ed|ing)?\b"
    r"|\bdriv(?:e|es|en|ing)\b|\bdrove\b|\bstem(?:s|med|ming)?\s+from\b|\bresponsib\w+"
    r"|\battribut\w+|\bexplain(?:s|ed|ing)?\b|\bexplanation\b|\breasons?\b|\bwhy\b"
    r"|\btherefore\b|\bthus\b|\bhence\b|(?:^|[,;:.]\s*|\band\s+)so\b(?!\s+(?:far|much|many))"
    r"|\bso\s+that\b|\bbehind\b|\bblame\w*|\bculprit\w*|\bbrought\s+(?:down|about|on)\b"
    r"|\bcontribut\w+|\bfactors?\b|\binduc(?:e|ed|es|ing)\b|\bproduc(?:e|ed|es|ing)\b"
    r"|\bgave\s+rise\b|\bgiv(?:e|es|ing)\s+rise\b|\bspark(?:ed|ing)\b"
    r"|\bprecipitat\w+|\bunderl(?:ie|ies|ying|ay)\b|\borigin(?:s|ated|ates)?\b"
    r"|\bsource\s+of\b|\bfrom\s+which\b|\bcorrelat\w+|\blink(?:s|ed)?\s+to\b"
    r"|\bfollow(?:s|ed|ing)?\s+from\b|\baccount(?:s|ed)?\s+for\b|\bin\s+turn\b"
    r"|\b(?:start(?:s|ed)?|beg[ai]n(?:s)?|begun|appear(?:s|ed)?|came|come)\s+with\b",
    re.IGNORECASE)
"""Wording that links one thing to another as its cause (or its correlate)."""

EXCLUSIVE = re.compile(
    r"\bsole(?:ly)?\b|\balone\b|\bonly\b|\bexclusive(?:ly)?\b|\bentire(?:ly)?\b"
    r"|\bpurely\b|\bsingle[\s-]*handed\w*|\bnothing\s+else\b|\bno\s+other\b"
    r"|\broot[\s-]*caus\w*|\b(?:primary|main|underlying|actual|real|true|ultimate|principal"
    r"|chief|key)\s+(?:cause|reason|driver|trigger)s?\b|\bthe\s+cause\b",
    re.IGNORECASE)
"""Wording that makes one thing the whole or the final explanation."""

CAUSE_NAMING = re.compile(
    r"\broot[\s-]*caus\w*|\b(?:primary|main|underlying|actual|real|true|ultimate|principal"
    r"|chief|key)\s+(?:cause|reason|driver|trigger)s?\b|\bthe\s+cause\b",
    re.IGNORECASE)
"""The part of EXCLUSIVE that names a cause: never a mere quantifier ("only error-level
logs were searched" restricts a search; "the root cause" settles an explanation)."""

CERTAINTY = re.compile(
    r"\bconfirm(?:s|ed|ing|ation)?\b|\bdefinite(?:ly)?\b|\bcertain(?:ly|ty)?\b"
    r"|\bclear(?:ly)?\b|\bundoubted(?:ly)?\b|\bdoubt\w*|\bprov(?:en|e|es|ed|ing)\b"
    r"|\bproof\b|\bconclusive(?:ly)?\b|\bestablish(?:es|ed|ing)?\b|\bobvious(?:ly)?\b"
    r"|\bevident(?:ly)?\b|\bsurely\b|\bguarantee\w*|\bunquestionabl\w*|\bindeed\b"
    r"|\bbeyond\s+(?:any\s+)?doubt\b|\bno\s+question\b|\bfor\s+sure\b|\bwithout\s+a\s+doubt\b"
    r"|\bmust\s+(?:have|be)\b|\bsettled\b|\bverified\s+(?:as|that)\b",
    re.IGNORECASE)
"""Wording that states a thing as settled."""

DENIAL = re.compile(
    r"\bno\s+(?:single\s+)?(?:root[\s-]*cause|cause)\s+(?:is|was|has\s+been|could\s+be"
    r"|can\s+be)?\s*(?:yet\s+)?(?:confirmed|identified|established|determined|found|known)\b"
    r"|\b(?:the\s+)?(?:root[\s-]*)?cause\s+(?:is|was|remains|stays)\s+(?:still\s+)?"
    r"(?:not\s+(?:yet\s+)?(?:confirmed|known|established|clear|determined|identified)"
    r"|unknown|unclear|undetermined|unconfirmed|open)\b"
    r"|\b(?:cannot|can\s*not|can't|could\s+not|couldn't)\s+(?:yet\s+)?(?:be\s+)?"
    r"(?:confirmed|determined|established|identified|confirm|determine|establish|identify)\b"
    r"|\bnot\s+(?:yet\s+)?(?:been\s+)?(?:confirmed|established|proven|determined)\b"
    r"|\b(?:the\s+)?(?:root[\s-]*)?cause\s+(?:cannot|can\s*not|can't|could\s+not|couldn't"
    r"|is\s+not|isn't|was\s+not|wasn't)\s+(?:yet\s+)?(?:be\s+|been\s+)?(?:confirmed|determined"
    r"|established|identified|known|named)\b"
    r"|\bnothing\s+(?:is|was)\s+(?:yet\s+)?(?:confirmed|known|established)\s+about\s+"
    r"(?:a|the|any)\s+(?:root[\s-]*)?cause\b"
    r"|\bnot\s+(?:a|the)\s+(?:yet\s+)?(?:confirmed|established|proven|known)\s+"
    r"(?:root[\s-]*)?cause\b"
    r"|\bunconfirmed\b",
    re.IGNORECASE)
"""A denial of a cause or of certainty: "no root cause is confirmed". Always safe to say."""

LEVELS: dict[str, int] = {
    "trace": 0, "debug": 1, "info": 2, "informational": 2, "notice": 3, "warn": 4,
    "warning": 4, "warnings": 4, "error": 5, "errors": 5, "err": 5, "fatal": 6,
    "critical": 6, "crit": 6, "panic": 7, "emerg": 7, "emergency": 7,
}
"""Log levels by severity: a negative observation may speak of the levels its query covered."""

OVERREACH = re.compile(
    r"\bat\s+all\b|\bwhatsoever\b|\banything\b|\beverything\b|\bever\b|\bentire(?:ly)?\b"
    r"|\bcompletely\b|\btotally\b|\bfully\b|\beven\b|\bhealth(?:y|ier)?\b|\bfine\b"
    r"|\bnormal(?:ly)?\b|\bunaffected\b|\bnot\s+affected\b|\bruled?\s+out\b"
    r"|\bno\s+(?:problems?|issues?|trouble|impact)\b|\bnothing\s+wrong\b|\bclean\b"
    r"|\bquiet\b|\bsilent\b|\bnowhere\b|\bany\s+(?:other|kind|level|logs?)\b"
    r"|\ball\s+(?:logs?|levels?|lines?|messages?)\b|\bnot\s+involved\b"
    r"|\bexonerat\w+|\binnocent\b|\bcan\s+be\s+excluded\b",
    re.IGNORECASE)
"""What a negative observation cannot say beyond its query: no quantifier wider than the
filter, no verdict of health."""

WIDE = re.compile(
    r"at\s+all|whatsoever|anything|everything|nowhere|any\s+other|entire(?:ly)?|completely"
    r"|totally", re.IGNORECASE)
"""The quantifiers of `OVERREACH`: a query that looked at everything in its window (every
service, no filter) bears them out ("no service at all was deployed between 14:05 and 15:10");
its verdicts of health it never does."""


PURPOSE = re.compile(
    r"\b(?:to|would|could|can|might|may|will|should|help(?:s)?\s+to|help(?:s)?)\s+"
    r"(?:help\s+(?:to\s+)?)?(?:confirm|verify|establish|prove|determine|settle|rule\s+out"
    r"|tell\s+(?:whether|if))\b",
    re.IGNORECASE)
"""A check named as a purpose ("needed to confirm the onset"): no certainty is claimed."""

ABSENCE = re.compile(
    r"\bnot?\b|\bnever\b|\bnone\b|\bnothing\b|\bneither\b|\bnor\b|n't\b|\bwithout\b"
    r"|\bmissing\b|\babsent\b|\black(?:s|ed|ing)?\b|\bunavailable\b|\bunknown\b"
    r"|\bun(?:checked|queried|verified|confirmed|examined|inspected|searched|tested|clear)\b"
    r"|\bneed(?:s|ed)?\b|\brequire[sd]?\b|\bwould\b|\bcould\b|\bshould\b|\bonly\b"
    r"|\bpending\b|\boutside\b|\bbeyond\b|\blimited\b|\bincomplete\b|\binsufficient\b"
    r"|\bgaps?\b|\bfailed\b|\berrored\b|\btimed\s+out\b|\bempty\b|\bpartial(?:ly)?\b"
    r"|\btruncated\b|\bwhether\b|\bremains?\s+to\b|\byet\s+to\b",
    re.IGNORECASE)
"""Wording that names something missing: every sentence of an evidence gap carries one."""

GAP_WORDS: frozenset[str] = frozenset("""
absent available availability baseline beyond check checked checking collect collected
complete confirm covered coverage data dashboard deploy deploys deployment deployments detail
details determine earlier enough established event events evidence examine examined failed
fetch fetched find found further gap gaps history inspect inspected investigation kubernetes
k8s later level levels limited lines log logs logged look looked lookup metric metrics
missing more need needed needs onset outside output pod pods queried query queries range
read records request requested require required result results retrieve retrieved return
returned rule runbook runbooks scope search searched series service services settle show
shown source sources span spans status step suggested tool tools trace traces traced
unavailable unknown utilization verify verified warning warnings window windows would run ran
cluster heap memory cpu disk usage thread threads pool pools queue queues cache caches
network latency throughput saturation rejection rejections capacity node nodes replica replicas
database db connection connections instance instances container containers host hosts jvm gc
storage io load traffic rate rates count counts size limit limits quota config configuration
flag flags setting settings upstream downstream dependency dependencies peak time times
timestamp timestamps start end duration value values error errors code codes status
anomaly anomalies payload payloads internals internal body bodies header headers call calls
signal signals open instruction instructions ai agent agents untrusted trusted treated data
object objects kubernetes line lines message messages entry entries object objects queried
made make used use problem problems issue issues symptom symptoms up
""".split())
"""Words that describe evidence and its absence: an evidence gap may use them beside the
words of the run's own material."""

ACTION_WORDS: frozenset[str] = frozenset("""
roll rolled rollback back revert reverting change changes changed watch monitor check checking
inspect look review compare escalate escalating owners owner team teams limit impact shorter
short timeouts timeout fewer retries retry circuit breaker until recovers recover recovery
follow runbook runbooks step steps configuration feature flags flag data traffic upstream
providers provider outside queried widen window traces trace users user report reports
problems problem indicated action actions restore confirm verify query search contact notify
alert alerts dashboard dashboards logs log metrics metric error errors rate latency version
versions deploy deployment previous release still again whether
fix fixes next take bring brings advise advises advised per first then afterwards
""".split())
"""Words an action may use beside those of the claims it cites and the runbook steps behind
it: verbs of operating a service and the names of what an operator looks at."""

CLAIM_WORDS: frozenset[str] = frozenset("""
problem problems issue issues began begin begins beginning started start starts starting
changed change changes new window nothing these logs logged log lines line such found seen
observed shows showed shown reported reports appear appears appeared service services errors
error failures failure failing failed onset time same best match matches matched symptom
symptoms utc gmt where preceding latency rose rise risen rising increase increased increasing
reached reach reaches peaked severe returning returned return returns http memory cpu use
used usage exhausted retries retry active objects object any kubernetes k8s warning warnings
pod pods container containers node nodes event events alert alerts message messages entry
entries record records value values reading readings sample samples series pattern patterns
level levels deploy deploys deployed deployment deployments rollout rollouts release released
version versions request requests response responses call calls
second seconds minute minutes hour hours day days morning afternoon evening night today
earlier later recent recently older newer latest previous next first last again since until
during nearby meanwhile throughout around side same different unrelated example span spans
spanned spanning
went go goes going gone come comes came coming occur occurs occurred occurring happen happens
happened happening hit hits hitting surface surfaces surfaced show shows showing throw throws
throwing threw thrown keep keeps kept stay stays stayed sat sit sits sitting run runs ran
follow follows followed
following repeat repeats repeated set sets moved move moves averaged average averages
involved besides otherwise apart according describe describes described recommend recommends
recommended burst bursts spread spreads
search searches searched searching query queries queried querying lookup lookups
attempt attempts attempted attempting try tries tried trying
answer answers answered answering serve serves served serving write writes wrote written
take takes took taking taken range ranges ranged ranging count counts counted counting
cover covers covered covering touch touches touched touching
""".split())
"""Words a claim may use beside those of the whole outputs of the tool calls it binds to: the
narration of an incident ("the problems began", "new in this window", "latency rose"), of
the queries that looked at it ("a deploy search across all services found nothing") and of
the records they returned ("answered 322 requests with HTTP 503", "the slowest took 0.45 s",
"response times ranged from 24 to 154 ms", "the log covers half a minute"); an attempt
("renewal attempts failed", "tried the invalid user admin") is what a failure or a retry is,
as "retries" is; never a cause, a component or an event of its own."""

CLOSED_WORDS: frozenset[str] = frozenset("""
all every always everywhere own likewise similarly how often long old ago
january february march april june july august september october november december
jan feb mar apr jun jul aug sep sept oct nov dec
monday tuesday wednesday thursday friday saturday sunday
""".split())
"""Closed classes a claim may use whatever its outputs say: quantifiers and frequency ("every
line", "always"), comparison and age ("likewise", "57m old"), and the calendar ("in June
2005", the month of the dates it binds to). None names a thing, a cause or an event; whether
"every" holds is a question for the facts it binds (`counts`), not for its words."""

KIND_WORDS: dict[str, frozenset[str]] = {
    "ip": frozenset("address addresses ip ips".split()),
    "path": frozenset("path paths file files directory directories".split()),
    "block": frozenset("block blocks".split()),
    "url": frozenset("url urls".split()),
}
"""Words that name the kind of a fact, by its shape (`facts.Fact.shape`): a claim that gives
an IP address may call it an address ("connections from many addresses, among them
82.252.162.81") whether or not its output says "address"; it names what the claim shows."""

HYPOTHESIS_WORDS: frozenset[str] = CLAIM_WORDS | frozenset("""
come comes came coming message messages name names named mention mentions mentioned outside
shortly soon something queried query data
""".split())
"""Words an Executor hypothesis may use beside those of the claims it rests on: it points at
what the claims name, or at what the queries did not cover."""

