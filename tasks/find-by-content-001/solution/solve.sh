#!/bin/bash
grep -rl 'yarrow-1730' /app/bison > /app/matches.txt
