
import ctxscope
from ctxscope.testing import ProviderServer, Reply

with ProviderServer() as server:
    server.reply(Reply.text("first answer"), Reply.text("second answer"), Reply.text("third answer"))
    client = server.openai_client()
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
    with ctxscope.session("black-holed"):
        for follow_up in ("and again", "once more", None):
            r = client.chat.completions.create(model="gpt-4o", messages=messages)
            if follow_up:
                messages += [{"role": "assistant", "content": r.choices[0].message.content},
                             {"role": "user", "content": follow_up}]
print("agent done", flush=True)
