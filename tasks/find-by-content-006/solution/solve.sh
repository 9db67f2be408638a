#!/bin/bash
grep -rl 'maple-7879' /app/salmon > /app/matches.txt
