"""``toy/signal_game_v0``: a speaker/listener referential game, the fast check for trainers.

Each round the ``speaker`` sees ``n_candidates`` words and which one is the target, and
sends a message of at most ``message_length`` words. The ``listener`` sees only the
message and the candidates (in its own random order, so position carries no signal) and
names the target. Joint reward: 1 per round in which the listener named the target and
nothing else; 0 otherwise. With ``reward_at="end"`` (a delayed-reward variant for multi-turn
credit assignment) every round pays 0 and the last one pays the number of rounds won. With
``speaker_turns="first"`` (roles with different step counts) the speaker sends one message in
the first round only; the target stays the same for the whole episode and every round the
listener sees fresh candidates (always holding the target) with that one message, so the
speaker has one row per episode and the listener ``n_rounds``. Observations are a few words
long, so a tiny model can learn the game on a CPU in minutes.

A convention to learn: with ``message_words`` the speaker may only use those words (its
observation lists them; any other word is dropped from the message). A message vocabulary
disjoint from the candidates (candidates ``cat dog fox owl``, messages ``red blue green
pink``) leaves no meaning the two agents share at the start: the team starts at chance and
wins only by agreeing on a code. :func:`best_policy` plays the code "the i-th vocabulary word
is sent as the i-th message word" (cyclic; optimal when there are at least as many message
words as vocabulary words).

Private names: with ``listener_words`` the listener knows the vocabulary by its own names (the
i-th vocabulary word is shown to it, and answered by it, as ``listener_words[i]``) while the speaker
sees and says the vocabulary words. A message then means nothing to the listener until the team
agrees on which of its names the speaker's words stand for: the speaker can name the target as an
instruct model would, and the listener must learn the correspondence. :func:`best_policy` answers
with the listener's name of the word the message names.

Format issues (reported in ``infos[agent]["format_issues"]``, penalized by
``format_penalty`` per agent, 0 by default): a message longer than ``message_length``
words (cut), message words outside ``message_words`` (dropped), a listener answer naming no candidate or several candidates.

Counterfactual masking ("rescore"): with the speaker masked the listener gets no message
and the round is worth its chance value ``1 / n_candidates``; with the listener masked
there is no answer and the round is worth 0.
"""

from __future__ import annotations

import re

import numpy as np

from llm_marl_envs.core import Action, Role, TextCollabEnv, TurnOutcome, make_env_fn, make_parallel_env_fn
from llm_marl_envs.core.cycles import noop_when_idle

DEFAULT_WORDS: tuple[str, ...] = (
    "apple", "boat", "cat", "drum", "egg", "fish", "goat", "hat",
    "ink", "jar", "kite", "lamp", "moon", "nut", "owl", "pen",
)  # fmt: skip

SPEAKER_INSTRUCTIONS = "You are the speaker. Tell the listener which candidate is the target."
LISTENER_INSTRUCTIONS = "You are the listener. Answer with the candidate the speaker means."
CODE_SPEAKER_INSTRUCTIONS = (
    "You are the speaker. Tell the listener which candidate is the target, using only the message words."
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words_of(text: str) -> list[str]:
    """Lower-cased words of ``text`` (letters and digits only)."""
    return [w.lower() for w in _WORD.findall(text)]


class raw_env(TextCollabEnv):
    """Speaker/listener signalling game.

    Args:
        n_candidates: candidates shown each round (2 <= n <= len(words)).
        message_length: maximum words in the speaker's message.
        n_rounds: rounds per episode (each round is one turn: speaker, then listener).
        reward_at: "round" (each round pays its win) or "end" (the last round pays all the wins).
        speaker_turns: "every" (a new target and message every round) or "first" (one message, in
            the first round, for a target that stays the same for the whole episode).
        words: the vocabulary candidates are drawn from.
        message_words: the only words a message may use (None: any word); see the module docstring.
        listener_words: the listener's own names of ``words`` (same length; None: the same words).
        format_penalty: added to the team reward once per agent with a format issue.
        render_mode: "ansi" or "human".
    """

    metadata = {"render_modes": ["ansi", "human"], "name": "signal_game_v0"}
    horizon_kwarg = "n_rounds"
    counterfactual_modes = ("rescore",)

    def __init__(
        self,
        n_candidates: int = 4,
        message_length: int = 2,
        n_rounds: int = 1,
        words: tuple[str, ...] = DEFAULT_WORDS,
        format_penalty: float = 0.0,
        max_action_chars: int = 4096,
        render_mode: str | None = None,
        reward_at: str = "round",
        speaker_turns: str = "every",
        message_words: tuple[str, ...] | None = None,
        listener_words: tuple[str, ...] | None = None,
    ) -> None:
        if reward_at not in ("round", "end"):
            raise ValueError(f"reward_at must be 'round' or 'end', got {reward_at!r}")
        if speaker_turns not in ("every", "first"):
            raise ValueError(f"speaker_turns must be 'every' or 'first', got {speaker_turns!r}")
        words = tuple(dict.fromkeys(w.lower() for w in words))
        if not 2 <= n_candidates <= len(words):
            raise ValueError(f"n_candidates must be in [2, {len(words)}], got {n_candidates}")
        if any(words_of(w) != [w] for w in words):
            raise ValueError("each vocabulary entry must be a single word of letters or digits")
        if message_length < 1 or n_rounds < 1:
            raise ValueError("message_length and n_rounds must be >= 1")
        if message_words is not None:
            message_words = tuple(dict.fromkeys(w.lower() for w in message_words))
            if not message_words or any(words_of(w) != [w] for w in message_words):
                raise ValueError("message_words must be non-empty, each a single word of letters or digits")
        if listener_words is not None:
            listener_words = tuple(w.lower() for w in listener_words)
            if len(set(listener_words)) != len(words) or any(words_of(w) != [w] for w in listener_words):
                raise ValueError(f"listener_words must be {len(words)} distinct single words, one per vocabulary word")
        speaker = CODE_SPEAKER_INSTRUCTIONS if message_words is not None else SPEAKER_INSTRUCTIONS
        super().__init__(
            [Role("speaker", speaker), Role("listener", LISTENER_INSTRUCTIONS)],
            max_turns=n_rounds,
            max_action_chars=max_action_chars,
            format_penalty=format_penalty,
            render_mode=render_mode,
        )
        self.n_candidates = n_candidates
        self.message_length = message_length
        self.n_rounds = n_rounds
        self.reward_at = reward_at
        self.speaker_turns = speaker_turns
        self.words = words
        self.message_words = message_words
        #: the listener's name of each vocabulary word, and back
        self.listener_name = dict(zip(words, listener_words or words))
        self.word_of_listener_name = {v: k for k, v in self.listener_name.items()}
        self.candidates: list[str] = []
        self.target = ""
        self.message = ""
        self.guess: str | None = None
        self.outcomes: list[bool] = []

    def _setup(self, rng: np.random.Generator, options: dict) -> None:
        self.outcomes = []

    def _speaks(self) -> bool:
        """Whether the speaker acts this turn (every turn, or only the first with ``speaker_turns="first"``)."""
        return self.speaker_turns == "every" or self.turn == 0

    def _turn_agents(self) -> list[str]:
        return list(self.agents) if self._speaks() else ["listener"]

    def _begin_turn(self) -> None:
        rng = self.np_random
        self.guess = None
        if not self._speaks():  # same target and message, fresh candidates holding the target
            others = [w for w in self.words if w != self.target]
            picks = rng.choice(len(others), size=self.n_candidates - 1, replace=False)
            self.candidates = [self.target, *(others[i] for i in picks)]
            self._show_listener()
            return
        picks = rng.choice(len(self.words), size=self.n_candidates, replace=False)
        self.candidates = [self.words[i] for i in picks]
        self.target = self.candidates[int(rng.integers(self.n_candidates))]
        self.message = ""
        vocabulary = f"\nmessage words: {' '.join(self.message_words)}" if self.message_words is not None else ""
        self.tell("speaker", f"candidates: {' '.join(self.candidates)}\ntarget: {self.target}{vocabulary}")

    def _show_listener(self) -> None:
        shown = [self.listener_name[w] for w in self.np_random.permutation(self.candidates)]
        self.tell("listener", f"candidates: {' '.join(shown)}\nmessage: {self.message}")

    def _on_action(self, agent: str, action: Action) -> None:
        if agent == "speaker":
            words = words_of(action.text)
            if self.message_words is not None:
                outside = [w for w in words if w not in self.message_words]
                if outside:
                    self.flag_format(agent, f"{len(outside)} word(s) outside the message words dropped: "
                                            + " ".join(outside[:5])[:80])
                words = [w for w in words if w in self.message_words]
            if len(words) > self.message_length:
                self.flag_format(agent, f"message of {len(words)} words cut to {self.message_length}")
            self.message = " ".join(words[: self.message_length])
            self._show_listener()
            return
        said = (self.word_of_listener_name.get(w) for w in words_of(action.text))
        named = list(dict.fromkeys(w for w in said if w in self.candidates))
        if len(named) == 1:
            self.guess = named[0]
        else:
            self.flag_format(agent, "named no candidate" if not named else f"named {len(named)} candidates")

    def _end_turn(self) -> TurnOutcome:
        correct = self.guess == self.target
        self.outcomes.append(correct)
        for agent in self.agents:
            name = self.listener_name[self.target] if agent == "listener" else self.target
            self.tell(agent, f"result: {'correct' if correct else f'wrong, target was {name}'}")
        last_round = len(self.outcomes) >= self.n_rounds
        reward = float(correct) if self.reward_at == "round" else float(sum(self.outcomes)) * last_round
        return TurnOutcome(reward, {"correct": float(correct)}, terminated=last_round)

    def _hidden_state(self) -> str:
        return f"candidates: {' '.join(self.candidates)}; target: {self.target}; outcomes: {self.outcomes}"

    def return_range(self) -> tuple[float, float]:
        speaker_flags = self.n_rounds if self.speaker_turns == "every" else 1
        low = self.format_penalty * (self.n_rounds + speaker_flags) if self.format_penalty < 0 else 0.0
        return (low, float(self.n_rounds))

    def action_words(self, agent: str) -> tuple[str, ...]:
        """The listener names a candidate (the vocabulary, by its own names); the speaker uses the message
        words, or the vocabulary when there are none."""
        if agent == "speaker" and self.message_words is not None:
            return self.message_words
        return tuple(self.listener_name[w] for w in self.words) if agent == "listener" else self.words

    def code_word(self, word: str) -> str:
        """The message :func:`best_policy` sends for ``word``: the message word at its vocabulary index (cyclic)."""
        assert self.message_words is not None
        return self.message_words[self.words.index(word) % len(self.message_words)]

    def coalition_value(self, unmasked: frozenset[str], mode: str = "rescore") -> float:
        if mode not in self.counterfactual_modes:
            raise ValueError(f"unsupported counterfactual mode {mode!r}; supported: {self.counterfactual_modes}")
        if "listener" not in unmasked:
            return 0.0
        if "speaker" not in unmasked:
            return len(self.outcomes) / self.n_candidates
        return float(sum(self.outcomes))


env = make_env_fn(raw_env)
parallel_env = make_parallel_env_fn(raw_env)


@noop_when_idle
def best_policy(env, agent: str) -> str:
    """Optimal play from the agent's own observation: name the target / echo the message; with
    ``message_words``, send the target's code word / name the candidate whose code word is the message;
    with ``listener_words``, answer by the listener's own name of the word meant."""
    text = env.observe(agent)["text"]
    last = text.rsplit("candidates:", 1)[-1]
    key = "target:" if agent == "speaker" else "message:"
    said = last.split(key, 1)[1].split("\n", 1)[0].strip()
    raw = env.unwrapped
    if agent == "speaker":
        return said if raw.message_words is None else raw.code_word(said)
    if raw.message_words is None:
        return raw.listener_name.get(said, said)  # echo the word meant, by the listener's own name
    shown = last.split("\n", 1)[0].split()
    return next((c for c in shown if raw.code_word(raw.word_of_listener_name[c]) == said), shown[0])


@noop_when_idle
def random_policy(env, agent: str, rng: np.random.Generator) -> str:
    """The speaker says a random candidate (a random message word with ``message_words``), the listener
    names a random candidate."""
    text = env.observe(agent)["text"]
    candidates = text.rsplit("candidates:", 1)[-1].split("\n", 1)[0].split()
    if agent == "speaker" and env.unwrapped.message_words is not None:
        candidates = list(env.unwrapped.message_words)
    return str(candidates[int(rng.integers(len(candidates)))])
