#!/bin/bash
grep -rl 'olive-6965' /app/fox > /app/anchor_matches.txt
