#!/bin/bash
grep -rl 'quill-1072' /app/fox > /app/matches.txt
