#!/bin/bash
grep -rl 'otter-5256' /app/salmon > /app/summit_matches.txt
