#!/bin/bash
grep -rl 'velvet-5727' /app/owl > /app/matches.txt
