#!/bin/bash
grep -rl 'lotus-8756' /app/harbor > /app/matches.txt
