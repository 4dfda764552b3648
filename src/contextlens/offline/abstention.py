"""Whether a reply abstains: it makes no checkable claim.

A refusal ("I'm sorry, I can only help with TechStore orders"), a "don't know" ("I don't
have that information"), an out-of-scope reply ("That is outside what I can answer"), a
greeting or thanks, or a question back ("Could you tell me more?") states nothing the
retrieved chunks could support or contradict. Such a reply is not applicable to the claim
metrics: scoring it 0 would call it a hallucination.

The test is lexical and strict: every sentence of the reply must be a question or consist
only of such acts (with openers such as "Sorry," "Unfortunately," "Yes,"), in English and
the common German, French and Spanish forms. A sentence with anything else, a number, an
address or a clause after "but" / "because" is a claim, so "I'm not sure, but returns are
accepted within 30 days" and "No, limescale damage is not covered" do not abstain. A bare
"Yes." or "No." answers a question and does not abstain either.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from contextlens.offline.text import sentences

__all__ = ["KINDS", "NO_CLAIM", "abstention"]

#: The kind of a text in which nothing is found to check (a judge listed no claim).
NO_CLAIM = "no claim"
#: What each kind of abstention is called in reasons.
KINDS = {
    "refusal": "a refusal",
    "out of scope": "an out-of-scope reply",
    "does not know": "a reply that does not know",
    "question": "a question back",
    "greeting": "a greeting or thanks",
    NO_CLAIM: "no claim",
}
_PRIORITY = tuple(KINDS)

# Words that open a clause carrying its own content: a tail that holds one is a claim.
_CONNECTIVES = (
    "because|since|but|however|although|though|except|unless|as|so|which|while|whereas|"
    "yet|weil|denn|aber|jedoch|sondern|parce|car|mais|porque|pero|sino"
)
#: Up to twelve more words of the same act ("... with TechStore orders"), none of them a
#: connective and no punctuation.
_TAIL = rf"(?:\s(?!(?:{_CONNECTIVES})\b)[^\s,;:.!?]+){{0,12}}"
_I = r"(?:i|we)"
_AM = r"(?:i am|we are)"
_UNABLE = (
    r"(?:cannot|could not|will not|would not|am not able to|am unable to|are not able to|"
    r"are unable to|was unable to|am not allowed to|are not allowed to|am not permitted to|"
    r"must decline to|have to decline to|will not be able to|would not be able to)"
)
_INFO = (
    r"(?:information|info|details?|data|knowledge|answer|answers|records?|context|insight|"
    r"specifics)"
)

_OPENERS = [
    rf"{_AM} (?:very |so |really |truly |terribly )?sorry(?: (?:about|for) that)?",
    r"sorry",
    r"(?:my )?apologies",
    rf"{_I} apologi[sz]e(?: for the inconvenience)?",
    r"unfortunately|regrettably|sadly|honestly|well|oh|hmm|ah|alas",
    rf"{_AM} afraid",
    r"yes|yeah|no|nope|sure|of course|certainly|absolutely|indeed|right",
    r"(?:es )?tut mir (?:sehr )?leid|entschuldigung|entschuldigen sie|leider|ja|nein|gerne",
    r"naturlich|(?:je suis )?desolee?|pardon|excusez-moi|malheureusement|oui|non|bien sur",
    r"lo (?:siento|lamento)|disculpe?|perdon|lamentablemente|desafortunadamente|si|claro",
]

_ACTS: list[tuple[str, str]] = [
    # --- refusals
    (
        "refusal",
        rf"{_I} (?:really |unfortunately |simply )?(?:{_UNABLE}|do not|am not going to) "
        r"(?:really )?(?:help|assist|answer|respond|reply|comment|discuss|advise|talk|speak|"
        rf"go into|get into|do that|do this|engage|elaborate|say more){_TAIL}",
    ),
    (
        "refusal",
        rf"{_I} (?:really |unfortunately |simply )?{_UNABLE} (?:provide|give|share|disclose)"
        r" (?:you )?(?:with )?(?:\w+ ){0,2}(?:information|details|advice|data|answers?|"
        rf"guidance|recommendations?|opinions?){_TAIL}",
    ),
    (
        "refusal",
        rf"(?:that|this|it) is (?:not )?something {_I} (?:cannot|can|am able to|are able to|"
        rf"could|am not able to) (?:not )?(?:help|assist|answer|discuss|comment on){_TAIL}",
    ),
    (
        "refusal",
        rf"{_I} (?:would|must|have to|need to|will) (?:politely |respectfully )?decline{_TAIL}",
    ),
    ("refusal", rf"{_AM} not in a position to{_TAIL}"),
    ("refusal", rf"{_I} (?:do not|cannot|does not) (?:have )?access (?:to|your|that|this){_TAIL}"),
    (
        "refusal",
        r"(?:ich kann|kann ich|wir konnen|konnen wir) (?:ihnen |dir |euch )?"
        r"(?:dabei |damit |hier |hierbei |"
        r"hierzu |dazu |da |leider |ihnen )*(?:leider )?nicht (?:weiter)?(?:helfen|antworten|"
        rf"beantworten|weiterhelfen){_TAIL}",
    ),
    ("refusal", rf"je ne (?:peux|pourrai) pas (?:vous |t')?(?:aider|repondre|en parler){_TAIL}"),
    ("refusal", rf"no (?:puedo|podemos) (?:ayudar(?:te|le|les)?|responder|contestar){_TAIL}"),
    # --- out of scope
    (
        "out of scope",
        rf"{_I} (?:can|am able to|are able to|may) only (?:help|assist|answer|respond|talk|"
        r"discuss|handle|deal|provide (?:help|information|assistance|support))(?: you)?"
        rf"(?: with| about| on| regarding| to| questions?| queries| requests?| topics?){{0,3}}"
        rf"{_TAIL}",
    ),
    (
        "out of scope",
        rf"{_AM} (?:only )?(?:here|able|designed|programmed|built|meant|trained|configured|"
        r"set up|supposed) (?:only )?to (?:help|assist|answer|support|talk|discuss)(?: you)?"
        rf"(?: with| about| on| regarding| questions?){{0,3}}{_TAIL}",
    ),
    (
        "out of scope",
        rf"{_I} (?:only|just) (?:help|assist|answer|discuss|talk)(?: you)?"
        rf"(?: with| about| on| questions?| queries){{0,3}}{_TAIL}",
    ),
    (
        "out of scope",
        r"(?:that|this|(?:that|this|your|the) (?:question|request|topic|query|subject|one)) "
        r"(?:is|falls|lies|seems to be|appears to be|would be) (?:outside|beyond|out of|"
        r"not within|not part of|not related to|unrelated to) (?:(?:of )?(?:the )?scope|my|"
        rf"what {_I}|the (?:topics?|areas?|subjects?|kinds? of (?:questions|topics|things)) "
        rf"{_I}|(?:the )?(?:remit|purview)){_TAIL}",
    ),
    (
        "out of scope",
        r"(?:my|our) (?:expertise|knowledge|focus|role|purpose|scope) is "
        rf"(?:limited|restricted) to{_TAIL}",
    ),
    (
        "out of scope",
        r"(?:please |you (?:can|could|may|might want to) |feel free to )?(?:contact|"
        rf"reach out to|get in touch with){_TAIL}",
    ),
    (
        "out of scope",
        r"(?:ich kann|kann ich|wir konnen|konnen wir) (?:ihnen |dir )?(?:leider )?nur "
        r"(?:bei|mit|zu|fragen|uber)"
        rf"{_TAIL}",
    ),
    ("out of scope", rf"das (?:liegt|ist) ausserhalb (?:meines|unseres){_TAIL}"),
    ("out of scope", rf"je ne peux (?:vous )?(?:aider|repondre) qu'{_TAIL}"),
    ("out of scope", rf"(?:cela|ceci|c'est|cette question) (?:est )?(?:en dehors|hors){_TAIL}"),
    ("out of scope", rf"solo (?:puedo|podemos) (?:ayudar(?:te|le|les)?|responder){_TAIL}"),
    # --- does not know
    (
        "does not know",
        rf"{_I} (?:really |honestly |simply |just |unfortunately )?(?:do not|did not) know{_TAIL}",
    ),
    (
        "does not know",
        rf"{_I} (?:do not|did not|does not) have (?:(?:any|that|this|such|the|enough|specific|"
        rf"more|sufficient|relevant|up-to-date|current|real-time|further|exact|precise) )*{_INFO}"
        rf"{_TAIL}",
    ),
    ("does not know", rf"{_I} (?:have|has) no (?:idea|clue|{_INFO}){_TAIL}"),
    ("does not know", r"no idea|not sure|no clue|unknown|hard to say"),
    ("does not know", rf"{_AM} (?:not (?:sure|certain|clear)|unsure|uncertain){_TAIL}"),
    (
        "does not know",
        rf"{_I} (?:could not|cannot|was unable to|were unable to|did not|am unable to|"
        r"am not able to) (?:find|locate|identify|determine|tell|say|answer|"
        rf"(?:confirm|verify) (?:this|that|it|whether|if)){_TAIL}",
    ),
    (
        "does not know",
        r"(?:the|this|that|my|our|these|those) (?:provided |given |available |retrieved )?"
        r"(?:context|information|documents?|docs|documentation|sources?|knowledge base|"
        r"passages?|chunks|excerpts?) (?:does not|do not|did not) "
        r"(?:say|mention|contain|include|provide|specify|state|cover|tell|answer|address|"
        rf"discuss|have|give|show){_TAIL}",
    ),
    ("does not know", rf"there is no (?:mention|indication|{_INFO}){_TAIL}"),
    ("does not know", rf"no {_INFO} (?:is |was )?(?:available|given|provided|found){_TAIL}"),
    (
        "does not know",
        r"(?:it|that) is (?:hard|difficult|impossible|not possible) to "
        rf"(?:say|tell|know|determine){_TAIL}",
    ),
    ("does not know", r"ich weiss (?:es |das )?(?:leider )?nicht|das weiss ich (?:leider )?nicht"),
    ("does not know", r"keine ahnung|ich bin (?:mir )?(?:nicht sicher|unsicher)"),
    (
        "does not know",
        r"(?:(?:dazu|daruber|hierzu) )?(?:habe ich|haben wir|liegen mir|gibt es|ich habe|"
        r"wir haben) (?:dazu |daruber |hierzu |leider )*keine "
        rf"(?:informationen|angaben|daten){_TAIL}",
    ),
    ("does not know", r"je ne (?:le )?sais pas|aucune idee|je ne suis pas (?:sure?|certaine?)"),
    (
        "does not know",
        r"je n'ai (?:pas|aucune) (?:d'|de |cette |l'|les |assez d'|assez de )?(?:information|"
        rf"informations|idee|reponse|donnees|details){_TAIL}",
    ),
    ("does not know", r"no (?:lo )?se|ni idea|no estoy (?:seguro|segura)"),
    (
        "does not know",
        rf"no tengo (?:esa |la |suficiente |ninguna )?(?:informacion|idea|respuesta|datos){_TAIL}",
    ),
    # --- questions back, said without a question mark
    (
        "question",
        r"(?:could|can|would) you (?:please )?(?:tell|give|share|provide|clarify|specify|"
        rf"explain|describe|rephrase|confirm|send|elaborate|be more specific){_TAIL}",
    ),
    (
        "question",
        r"please (?:clarify|specify|provide|tell me|share|give me|rephrase|send|confirm|"
        rf"describe|explain|let me know){_TAIL}",
    ),
    (
        "question",
        rf"{_I} (?:need|would need|will need) (?:a bit |some )?more "
        rf"(?:information|details|context){_TAIL}",
    ),
    ("question", rf"what do you mean{_TAIL}"),
    # --- greetings, thanks, offers of help
    (
        "greeting",
        r"(?:hi|hello|hey|hiya|greetings|good (?:morning|afternoon|evening|day)|"
        r"welcome(?: back)?|dear \w+)(?: (?:there|again|everyone|all|\w+))?",
    ),
    (
        "greeting",
        r"(?:thank you|thanks|many thanks|much appreciated)(?: (?:very much|so much|a lot))?"
        rf"(?: (?:for|again){_TAIL})?",
    ),
    (
        "greeting",
        r"you are (?:very |most )?welcome|no problem|no worries|my pleasure|anytime|any time|"
        r"cheers|bye|goodbye|good bye|see you|take care|all the best|(?:best|kind) regards|"
        r"have a (?:nice|great|good|lovely|wonderful) (?:day|evening|weekend|one|time)|"
        r"okay|ok|got it|understood|noted|alright|all right|great|perfect|good question|"
        r"(?:it is|it was) (?:my pleasure|a pleasure)|nice to (?:meet|hear from) you",
    ),
    (
        "greeting",
        rf"(?:{_AM} )?(?:happy|glad|pleased|here) to (?:help|assist)(?: you)?"
        rf"(?: (?:with|further|anytime|again){_TAIL})?",
    ),
    ("greeting", rf"(?:how|what) (?:can|may|could) {_I} (?:help|assist|do for) you{_TAIL}"),
    ("greeting", rf"(?:is there )?anything else {_I} (?:can|could|may) (?:help|assist|do){_TAIL}"),
    (
        "greeting",
        rf"(?:let (?:me|us) know|feel free to (?:ask|reach out|get in touch)){_TAIL}",
    ),
    ("greeting", rf"{_I} hope (?:this|that) (?:helps|was helpful|answers your question){_TAIL}"),
    ("greeting", r"(?:please )?(?:hold on|one moment|give me a moment|bear with me)"),
    (
        "greeting",
        r"hallo|guten (?:tag|morgen|abend)|servus|moin|danke(?: schon| sehr)?|vielen dank"
        rf"(?: fur{_TAIL})?|bitte(?: sehr| schon)?|gern geschehen|auf wiedersehen|tschuss|"
        r"wie kann ich (?:ihnen|dir|euch) (?:helfen|weiterhelfen)",
    ),
    (
        "greeting",
        r"bonjour|bonsoir|salut|merci(?: beaucoup)?|de rien|au revoir|bonne journee|"
        r"je vous en prie|avec plaisir|comment puis-je vous aider",
    ),
    (
        "greeting",
        r"hola|buenos dias|buenas (?:tardes|noches)|(?:muchas )?gracias(?: por (?:su|tu) "
        r"(?:pregunta|mensaje|consulta))?|de nada|adios|hasta luego|"
        r"en que (?:puedo|le puedo|te puedo) ayudar(?:te|le)?",
    ),
]

#: Where an act may end: the end of the sentence, punctuation, or "and" / "but" / "so".
_END = r"(?=$|\s*[,;:.!]|\s+(?:and|but|or|so|und|aber|et|mais|y|pero)\b)"
_OPENER = re.compile(rf"(?:{'|'.join(_OPENERS)})(?=$|[\s,;:.!])")
_COMPILED = [(kind, re.compile(rf"(?:{pattern}){_END}")) for kind, pattern in _ACTS]
_SEP = re.compile(r"(?:\s*[,;:.!]+)*\s*(?:(?:and|but|or|so|und|aber|et|mais|y|pero)\s+)?")
#: Sentence ends the shared splitter keeps together (it wants a capital after them).
_LOWER_END = re.compile(r"(?<=[.!?])\s+")
#: A question back is short, or speaks to the user; a longer one carries its own claims
#: ("How can agents that worsen social dilemmas be built?").
_QUESTION_WORDS = 12
_TO_YOU = re.compile(r"\b(?:you|your|yours|sie|ihnen|du|dir|vous|votre|tu|usted|su|te)\b")
#: A question that wraps a claim ("Did you know that the museum is free?").
_CLAIM_QUESTION = re.compile(r"^(?:did|do) you know that\b|^is it true that\b")
#: A sentence holding any of these states something checkable.
_SPECIFIC = re.compile(r"\d|@|https?://|www\.")

_CONTRACTIONS = {
    "i'm": "i am",
    "im": "i am",
    "we're": "we are",
    "you're": "you are",
    "can't": "cannot",
    "cant": "cannot",
    "can not": "cannot",
    "won't": "will not",
    "wouldn't": "would not",
    "don't": "do not",
    "dont": "do not",
    "doesn't": "does not",
    "didn't": "did not",
    "couldn't": "could not",
    "wasn't": "was not",
    "isn't": "is not",
    "aren't": "are not",
    "haven't": "have not",
    "hasn't": "has not",
    "that's": "that is",
    "it's": "it is",
    "there's": "there is",
    "i've": "i have",
    "we've": "we have",
    "i'd": "i would",
    "we'd": "we would",
    "i'll": "i will",
    "we'll": "we will",
    "what's": "what is",
}
_CONTRACTION = re.compile(
    r"\b(?:" + "|".join(re.escape(k) for k in sorted(_CONTRACTIONS, key=len, reverse=True)) + r")\b"
)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u00b4": "'", "`": "'"})


def _normal(sentence: str) -> str:
    """Lower case, accents and contractions spelt out, one space between words."""
    text = sentence.translate(_APOSTROPHES).replace("ß", "ss").lower()
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    text = re.sub(r"[\"“”«»()\[\]*_]+", " ", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = _CONTRACTION.sub(lambda m: _CONTRACTIONS[m.group(0)], text)
    return text.strip(" .!…-—–")


def _acts(text: str) -> list[str] | None:
    """The kinds of the acts ``text`` (one normalised sentence) consists of, in order (none
    for openers alone); None when anything in it is not such an act."""
    pos, kinds = 0, list[str]()
    while True:
        pos = _SEP.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= len(text):
            return kinds
        found = next(
            ((kind, m) for kind, pattern in _COMPILED if (m := pattern.match(text, pos))),
            None,
        )
        if found is not None:
            kinds.append(found[0])
            pos = found[1].end()
            continue
        opener = _OPENER.match(text, pos)
        if opener is None or opener.end() == pos:
            return None
        pos = opener.end()


@lru_cache(maxsize=4096)
def abstention(text: str) -> str | None:
    """The kind of abstention ``text`` is (a key of :data:`KINDS`), or None when it makes
    a checkable claim (or is empty)."""
    found: list[str] = []
    for raw in (p for s in sentences(text or "") for p in _LOWER_END.split(s)):
        question = raw.rstrip().endswith("?")
        sentence = _normal(raw.rstrip().rstrip("?"))
        if not sentence:
            continue
        kinds = None if _SPECIFIC.search(sentence) else _acts(sentence)
        if kinds:
            found.extend(kinds)
        elif (
            question
            and not _CLAIM_QUESTION.search(sentence)
            and (len(sentence.split()) <= _QUESTION_WORDS or _TO_YOU.search(sentence))
        ):
            found.append("question")
        else:
            return None  # a claim, or openers alone ("Yes.") that answer
    if not found:
        return None
    return min(found, key=_PRIORITY.index)
